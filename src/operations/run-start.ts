import { HermesFailure } from '../failures.js';
import { callJson } from './json-call.js';
import { RUNS_ROUTE, type Operation } from './operation.js';

export interface RunStartInput {
  body: { input: string | Array<Record<string, unknown>>; [field: string]: unknown };
  session_key?: string;
}

/** POST /v1/runs: the body goes to Hermes as given; `session_key` travels only as a header. */
export const runStart: Operation<RunStartInput> = {
  name: 'run_start',
  checkInput({ body }) {
    if (Array.isArray(body.input) && !hasContent(body.input[body.input.length - 1]?.content)) {
      throw new HermesFailure('invalid_input', 'The last message of `body.input` must have non-empty `content`');
    }
  },
  execute: (call) => callJson(call, { method: 'POST', route: RUNS_ROUTE, body: call.input.body, sessionKey: call.input.session_key }),
  bindRun({ endpoint, capabilityId, actionId, input, context, result, now }) {
    if (result.status !== 'completed') return undefined;
    const output = result.output as { run_id: string; status: string };
    const requested = input.body.session_id;
    return {
      action_id: actionId,
      capability_id: capabilityId,
      endpoint_id: endpoint.id,
      tenant_id: context.tenantId ?? null,
      run_id: output.run_id,
      // Hermes uses the run id as the session when none is given.
      session_id: typeof requested === 'string' ? requested : output.run_id,
      credential_revision: endpoint.credentialRevision ?? null,
      created_at: now,
      updated_at: now,
      last_status: output.status,
      terminal_event: null,
      evidence_lost: false,
    };
  },
};

function hasContent(content: unknown): boolean {
  return (typeof content === 'string' || Array.isArray(content)) && content.length > 0;
}
