import type { ScenarioEvidence } from '../../kit/types.js';
import { codeOf, outcome, type Harness } from '../harness.js';

/** Inputs that break their schema never leave; a provider answer that breaks its schema is not a success. */
export async function schemaEnforcement(h: Harness): Promise<ScenarioEvidence> {
  const connector = h.connector();
  const start = await h.startRun(connector, 'harmless');
  await h.readEvents(connector, start.runId);
  const invalid = [
    await h.invoke(connector, 'run_status', {}),
    await h.invoke(connector, 'run_status', { run_id: '..' }),
    await h.invoke(connector, 'run_events', { run_id: start.runId, max_events: 0 }),
    await h.invoke(connector, 'run_approval', { run_id: start.runId, choice: 'maybe' }),
  ];
  const inputsRejected = invalid.every((call) => codeOf(call.result) === 'invalid_input' && call.requests.length === 0);

  h.proxy.arm({ method: 'GET', path: new RegExp(`^/v1/runs/${start.runId}$`), replaceBody: '["not", "a", "status", "object"]' });
  const bad = await h.invoke(connector, 'run_status', { run_id: start.runId });
  const outputRejected =
    bad.result.status === 'failed' && codeOf(bad.result) === 'invalid_response' && bad.requests.length === 1 && bad.requests[0]?.forwarded === true;

  return {
    source: h.provider.source,
    assertions: {
      invalid_input_rejected: outcome(
        inputsRejected,
        inputsRejected
          ? `${invalid.length} inputs breaking their schemas (missing run_id, run_id "..", max_events 0, choice "maybe") were refused as invalid_input with no request`
          : `answers: ${invalid.map((call) => `${codeOf(call.result) ?? call.result.status} after ${call.requests.length} request(s)`).join(', ')}`,
      ),
      invalid_output_rejected: outcome(
        outputRejected,
        outputRejected
          ? 'a status answer rewritten at the proxy into a JSON array (not the status object) failed as invalid_response'
          : `the rewritten status answer came back as ${codeOf(bad.result) ?? bad.result.status}`,
      ),
    },
    artifacts: [...invalid.map((call) => call.action.id), bad.action.id, ...bad.requests.map((request) => request.id)],
    hostRoles: [],
    observations: {
      invalid_inputs: invalid.map((call) => ({ action_id: call.action.id, code: call.result.error?.code ?? null, provider_requests: call.requests.length })),
      invalid_output: { action_id: bad.action.id, status: bad.result.status, code: bad.result.error?.code ?? null, proxy_request: bad.requests[0]?.id ?? null },
    },
    detail: 'invalid inputs refused locally; an invalid provider answer (rewritten by the kit’s proxy) refused',
  };
}
