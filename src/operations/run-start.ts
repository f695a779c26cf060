import { HermesFailure } from '../failures.js';
import type { EndpointOffer } from '../discovery/offer.js';
import { callJsonResendingLostAnswers } from './resend.js';
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
  // A Hermes that keeps run idempotency keys durably answers a repeated start with the run it started.
  resendableOn: keepsStartKeys,
  execute: (call) =>
    callJsonResendingLostAnswers(call, { method: 'POST', route: RUNS_ROUTE, body: call.input.body, sessionKey: call.input.session_key }, keepsStartKeys),
  bindRun({ endpoint, capabilityId, actionId, input, context, result, now }) {
    if (result.status !== 'completed') return undefined;
    const output = result.output as { run_id: string; status: string; replayed?: unknown };
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
      // Hermes answered from its own record: the start was sent again after its answer was lost (or another process sent it).
      learned_from: output.replayed === true ? 'provider_replay' : 'start_answer',
    };
  },
};

function keepsStartKeys(offer: EndpointOffer): boolean {
  return offer.durable_run_idempotency !== null;
}

function hasContent(content: unknown): boolean {
  return (typeof content === 'string' || Array.isArray(content)) && content.length > 0;
}
