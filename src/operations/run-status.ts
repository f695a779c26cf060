import { callJson } from './json-call.js';
import { checkRunId, runPath, type Operation } from './operation.js';

export interface RunIdInput {
  run_id: string;
}

/** GET /v1/runs/{run_id}: the provider's status object. */
export const runStatus: Operation<RunIdInput> = {
  name: 'run_status',
  checkInput: ({ run_id }) => checkRunId(run_id),
  execute: (call) => callJson(call, { method: 'GET', path: runPath(call.input.run_id, '') }),
};
