import { callJson } from './json-call.js';
import { checkRunId, runRoute, type Operation } from './operation.js';
import type { RunIdInput } from './run-status.js';

/** POST /v1/runs/{run_id}/stop, no body: a `stopping` receipt, not proof of cancellation. */
export const runStop: Operation<RunIdInput> = {
  name: 'run_stop',
  checkInput: ({ run_id }) => checkRunId(run_id),
  execute: (call) => callJson(call, { method: 'POST', route: runRoute(call.input.run_id, '/stop') }),
  learnAboutRun: ({ result, now }) =>
    result.status === 'completed' ? { updated_at: now, last_status: (result.output as { status: string }).status } : undefined,
};
