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
};
