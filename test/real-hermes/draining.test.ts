/**
 * A draining gateway (0.19.0 and later): once Hermes' own drain marker is written, `POST /v1/runs`
 * answers 503 `gateway_draining` with `Retry-After: 1` before reading the body, and the connector
 * reports `draining`: temporary, retryable, not an uncertain outcome, nothing started. 0.18.2 has
 * no drain control.
 */
import { expect, test } from 'vitest';
import { describeEachReleaseWithEndpoint, SCENARIO_TIMEOUT_MS, type RealEndpoint } from './support.js';

const PREFIX = 'connector.hermes_agent.';
/** The gateway polls its drain marker every second; this only bounds a gateway that never drains. */
const DRAIN_POLLS = 120;

describeEachReleaseWithEndpoint('real Hermes %s while its gateway drains', (current, version) => {
  const drains = version !== '0.18.2';

  /** `{}` is refused with 400 while Hermes admits runs, and with 503 once it drains: no run starts either way. */
  async function untilRefusingRuns(endpoint: RealEndpoint): Promise<number> {
    let status = 0;
    for (let poll = 0; poll < DRAIN_POLLS && status !== 503; poll += 1) {
      if (poll > 0) await new Promise((resolve) => setTimeout(resolve, 250));
      const answer = await fetch(`${endpoint.hermes.baseUrl}/v1/runs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${endpoint.hermes.apiKey}`, 'content-type': 'application/json' },
        body: '{}',
      });
      await answer.arrayBuffer();
      status = answer.status;
    }
    return status;
  }

  test.skipIf(!drains)(
    'a start is refused as draining, with retry_after_ms from Retry-After',
    async () => {
      const endpoint = current();
      await endpoint.hermes.requestDrain();
      expect(await untilRefusingRuns(endpoint)).toBe(503);
      const { h } = endpoint;
      const result = await h.invoke({
        capability_id: h.cap('run_start'),
        input: { body: { input: 'Reply with the single word: late' } },
        idempotency_key: `drain-${version}`,
      });
      expect(result.status).toBe('failed');
      expect(result.error).toMatchObject({ code: `${PREFIX}draining`, category: 'temporary', retryable: true, retry_after_ms: 1000 });
      expect(result.error?.details).toMatchObject({ remote_status: 503, provider_code: 'gateway_draining', uncertain_outcome: false });
    },
    SCENARIO_TIMEOUT_MS,
  );
});
