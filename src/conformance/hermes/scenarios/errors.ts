import type { ScenarioEvidence } from '../../kit/types.js';
import { codeOf, outcome, type Harness } from '../harness.js';

/** A provider error body that reflects the credential, as a hostile or careless provider might. */
function reflectingBody(apiKey: string): string {
  return JSON.stringify({
    error: { message: `upstream overloaded for Bearer ${apiKey}`, code: 'overloaded' },
    authorization: `Bearer ${apiKey}`,
    access_token: apiKey,
  });
}

/** Typed errors keep their protocol fields; an uncertain mutation is never blindly retried; no error carries a secret. */
export async function errorsUncertainOutcomes(h: Harness): Promise<ScenarioEvidence> {
  const connector = h.connector();
  const body = reflectingBody(h.provider.apiKey);
  h.proxy.arm({ method: 'GET', path: /^\/v1\/runs\/run_conformance_unreachable$/, respond: { status: 503, body } });
  const read = await h.invoke(connector, 'run_status', { run_id: 'run_conformance_unreachable' });
  const readError = read.result.error;
  const preserved =
    read.result.status === 'failed' &&
    readError?.category === 'temporary' &&
    readError.retryable &&
    readError.details?.remote_status === 503 &&
    readError.details.uncertain_outcome === false &&
    readError.details.endpoint_id === h.provider.endpointId &&
    readError.details.operation === 'run_status';

  h.proxy.arm({ method: 'POST', path: /^\/v1\/runs$/, respond: { status: 503, body } });
  const mutation = await h.invoke(connector, 'run_start', { body: h.provider.bodies.harmless() });
  const mutationError = mutation.result.error;
  const retry = await h.send(connector, mutation.action);
  const reconciled =
    mutationError?.details?.uncertain_outcome === true &&
    mutationError.retryable === false &&
    mutationError.details.remote_status === 503 &&
    retry.requests.length === 0 &&
    retry.result.status === 'failed' &&
    retry.result.error?.details?.uncertain_outcome === true;

  const redacted = h.secretAbsent(h.provider.apiKey, [read.result, mutation.result, retry.result]);

  return {
    source: h.provider.source,
    assertions: {
      protocol_fields_preserved: outcome(
        preserved,
        preserved
          ? 'a read answered 503 came back temporary, retryable, not uncertain, with remote_status 503, endpoint and operation'
          : `the read failure was ${JSON.stringify({ code: readError?.code, category: readError?.category, retryable: readError?.retryable, remote_status: readError?.details?.remote_status })}`,
      ),
      uncertain_outcome_reconciled: outcome(
        reconciled,
        reconciled
          ? 'a run_start answered 503 came back uncertain and not retryable; sending the same action again was answered from the ledger as uncertain, with no second request'
          : `the start failure said uncertain ${String(mutationError?.details?.uncertain_outcome)}, retryable ${String(mutationError?.retryable)}; the resend made ${retry.requests.length} request(s) and answered ${codeOf(retry.result) ?? retry.result.status}`,
      ),
      error_secrets_redacted: outcome(
        redacted,
        redacted
          ? 'the error bodies reflected the bearer key; no failure, message, detail or log line carries it'
          : 'the key appeared in a failure or a log line',
      ),
    },
    artifacts: [read.action.id, mutation.action.id, ...[...read.requests, ...mutation.requests].map((request) => request.id)],
    hostRoles: [],
    observations: {
      read_failure: {
        action_id: read.action.id,
        code: readError?.code ?? null,
        category: readError?.category ?? null,
        retryable: readError?.retryable ?? null,
        details: readError?.details ?? null,
      },
      mutation_failure: {
        action_id: mutation.action.id,
        code: mutationError?.code ?? null,
        retryable: mutationError?.retryable ?? null,
        uncertain_outcome: mutationError?.details?.uncertain_outcome ?? null,
      },
      resend: { provider_requests: retry.requests.length, code: retry.result.error?.code ?? null },
    },
    detail: 'the proxy answered 503 (with the key reflected in the body) without forwarding: nothing ran at the provider',
  };
}
