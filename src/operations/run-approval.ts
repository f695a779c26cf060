import { callJson } from './json-call.js';
import { checkRunId, runRoute, type Operation } from './operation.js';

export interface RunApprovalInput {
  run_id: string;
  choice: 'once' | 'session' | 'always' | 'deny' | 'approve' | 'allow';
  resolve_all?: boolean;
  /** The exact approval request the reviewer saw (`approval.request`'s `request_id`, Hermes 0.20.1 on). */
  request_id?: string;
}

/** Hermes normalizes these aliases to `once` itself; sending the canonical choice keeps stored intent equal to provider events. */
const CHOICE_ALIASES: Record<string, string> = { approve: 'once', allow: 'once' };

/** POST /v1/runs/{run_id}/approval with `{ choice, resolve_all?, request_id? }` built from the validated input, never the raw input. */
export const runApproval: Operation<RunApprovalInput> = {
  name: 'run_approval',
  checkInput: ({ run_id }) => checkRunId(run_id),
  execute(call) {
    const { run_id, choice, resolve_all, request_id } = call.input;
    const body: Record<string, unknown> = { choice: CHOICE_ALIASES[choice] ?? choice };
    if (resolve_all !== undefined) body.resolve_all = resolve_all;
    if (request_id !== undefined) body.request_id = request_id;
    return callJson(call, { method: 'POST', route: runRoute(run_id, '/approval'), body });
  },
};
