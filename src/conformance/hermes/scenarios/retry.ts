import type { AipActionResult } from '../../../index.js';
import type { ScenarioEvidence } from '../../kit/types.js';
import { outcome, type Harness } from '../harness.js';

/** The host's retry policy the kit plays: the connector never retries on its own; the runtime does. */
const RETRY_POLICY = { maxAttempts: 2, baseDelayMs: 100 };

/** A retryable read failure keeps its typing; the host backs off, retries, and dead-letters at exhaustion. */
export async function retryExhaustion(h: Harness): Promise<ScenarioEvidence> {
  const connector = h.connector();
  const start = await h.startRun(connector, 'harmless');
  await h.readEvents(connector, start.runId);
  const route = new RegExp(`^/v1/runs/${start.runId}/events$`);
  h.proxy.arm({
    method: 'GET',
    path: route,
    times: RETRY_POLICY.maxAttempts + 1,
    respond: { status: 503, body: '{"error":{"message":"temporarily unavailable","type":"server_error"}}' },
  });

  const action = h.action('run_events', { run_id: start.runId });
  const attempts: Array<{ result: AipActionResult; planned_delay_ms: number | null }> = [];
  const deadLetters: Array<{ action_id: string; attempts: number; last_code: string | null }> = [];
  const before = h.proxy.requests.length;
  for (let attempt = 1; ; attempt++) {
    const { result } = await h.send(connector, action);
    const retryable = result.error?.retryable === true;
    const delay =
      retryable && attempt < RETRY_POLICY.maxAttempts ? Math.max(RETRY_POLICY.baseDelayMs * 2 ** (attempt - 1), result.error?.retry_after_ms ?? 0) : null;
    attempts.push({ result, planned_delay_ms: delay });
    if (delay === null) {
      if (retryable || result.status === 'failed') deadLetters.push({ action_id: action.id, attempts: attempt, last_code: result.error?.code ?? null });
      break;
    }
    await h.clock.sleep(delay);
  }
  const requests = h.proxy.requests.slice(before).filter((request) => route.test(request.path));

  const preserved = attempts.every(
    ({ result }) =>
      result.error?.category === 'temporary' &&
      result.error.retryable &&
      result.error.details?.remote_status === 503 &&
      !result.error.details.uncertain_outcome,
  );
  const planned = attempts[0]?.planned_delay_ms ?? null;
  const gap = requests.length >= 2 ? (requests[1]?.received_at ?? 0) - (requests[0]?.received_at ?? 0) : null;
  const backoff = planned !== null && gap !== null && gap >= planned;
  const exhausted = deadLetters.length === 1 && deadLetters[0]?.attempts === RETRY_POLICY.maxAttempts && requests.length === RETRY_POLICY.maxAttempts;

  return {
    source: h.provider.source,
    assertions: {
      retryable_error_preserved: outcome(
        preserved,
        preserved
          ? 'every 503 on run_events came back temporary, retryable, not uncertain, with remote_status 503'
          : `attempts answered ${attempts.map(({ result }) => `${result.error?.category}/${String(result.error?.retryable)}`).join(', ')}`,
      ),
      backoff_observed: outcome(
        backoff,
        gap === null
          ? 'fewer than two attempts reached the provider'
          : `the proxy saw the retry ${gap} ms after the first attempt; the host planned ${String(planned)} ms`,
      ),
      exhaustion_dead_lettered: outcome(
        exhausted,
        exhausted
          ? `after ${RETRY_POLICY.maxAttempts} attempts (exactly ${requests.length} provider requests: the connector added none) the host dead-lettered the action`
          : `${requests.length} provider request(s) for ${attempts.length} host attempt(s); dead letters ${deadLetters.length}`,
      ),
    },
    artifacts: [action.id, ...requests.map((request) => request.id)],
    hostRoles: [`retry policy (${RETRY_POLICY.maxAttempts} attempts, ${RETRY_POLICY.baseDelayMs} ms doubling, Retry-After honoured) and dead-letter queue`],
    observations: {
      attempts: attempts.map(({ result, planned_delay_ms }) => ({
        code: result.error?.code ?? null,
        retryable: result.error?.retryable ?? null,
        planned_delay_ms,
      })),
      dead_letters: deadLetters,
      provider_requests: requests.map((request) => ({ id: request.id, received_at: request.received_at, status: request.status })),
    },
    detail: 'the proxy answered 503 to the event stream; the kit, as host, retried once with backoff and dead-lettered',
  };
}
