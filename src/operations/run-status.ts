import { ERROR_CODE_PREFIX } from '../internal/package-info.js';
import { callJson } from './json-call.js';
import { checkRunId, runRoute, type Operation } from './operation.js';

export interface RunIdInput {
  run_id: string;
}

/** GET /v1/runs/{run_id}: the provider's status object. */
export const runStatus: Operation<RunIdInput> = {
  name: 'run_status',
  checkInput: ({ run_id }) => checkRunId(run_id),
  execute: (call) => callJson(call, { method: 'GET', route: runRoute(call.input.run_id, '') }),
  learnAboutRun({ result, now }) {
    if (result.status === 'completed') return { updated_at: now, last_status: (result.output as { status: string }).status };
    // Hermes no longer knows the run: retention expiry or a restart, never "did not run".
    if (result.error?.code === `${ERROR_CODE_PREFIX}not_found`) return { updated_at: now, evidence_lost: true };
    return undefined;
  },
};
