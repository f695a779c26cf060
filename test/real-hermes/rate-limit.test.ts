/**
 * Hermes' concurrency gate (`gateway.api_server.max_concurrent_runs`), set to 2 on its own real
 * Hermes per release: two runs held at their approvals fill it, and a third start maps to
 * rate_limited with Hermes' Retry-After. (0.18.2 counts run streams, 0.19.0 active run tasks: runs
 * waiting for an approval count in both.)
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { grantFor, nextId } from '../helpers/harness.js';
import { describeEachRelease, SCENARIO_TIMEOUT_MS, START_TIMEOUT_MS, startRealEndpoint, type RealEndpoint } from './support.js';

describeEachRelease('real Hermes %s with max_concurrent_runs 2', { timeout: SCENARIO_TIMEOUT_MS }, (version) => {
  let endpoint: RealEndpoint;
  beforeAll(async () => {
    endpoint = await startRealEndpoint({ version, maxConcurrentRuns: 2 });
  }, START_TIMEOUT_MS);
  afterAll(async () => {
    await endpoint?.close();
  }, START_TIMEOUT_MS);

  test('a start beyond the gate is rate_limited with retry_after_ms from Retry-After; slots free up once the runs end', async () => {
    const { h } = endpoint;
    const held = [];
    for (const name of ['held-a', 'held-b']) {
      endpoint.scratchFolder(name);
      held.push(await h.startRun({ input: `Run the shell command: rm -rf ./${name}` }));
    }
    for (const runId of held) await waitForWaiting(endpoint, runId);

    const result = await h.invoke({
      capability_id: h.cap('run_start'),
      input: { body: { input: 'Reply with the single word: late' } },
      idempotency_key: nextId('key'),
    });
    expect(result.error).toMatchObject({ code: 'connector.hermes_agent.rate_limited', category: 'temporary', retryable: true, retry_after_ms: 1000 });
    expect(result.error?.details).toMatchObject({ remote_status: 429, provider_code: 'rate_limit_exceeded' });

    for (const runId of held) {
      const input = { run_id: runId, choice: 'deny' };
      const denied = await h.invoke({ capability_id: h.cap('run_approval'), input, idempotency_key: nextId('key') }, { approval: grantFor(input) });
      expect(denied.status, JSON.stringify(denied.error)).toBe('completed');
      const events = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } });
      expect(events.status, JSON.stringify(events.error)).toBe('completed');
    }
    // Both slots are free again once the runs have ended and their streams were read.
    const after = await h.invoke({
      capability_id: h.cap('run_start'),
      input: { body: { input: 'Reply with the single word: free' } },
      idempotency_key: nextId('key'),
    });
    expect(after.status, JSON.stringify(after.error)).toBe('completed');
  });
});

async function waitForWaiting(endpoint: RealEndpoint, runId: string): Promise<void> {
  const { h } = endpoint;
  for (let attempt = 0; attempt < 150; attempt++) {
    const result = await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: runId } });
    if ((result.output as { status?: string } | undefined)?.status === 'waiting_for_approval') return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`run ${runId} never waited for its approval (version ${endpoint.hermes.version})`);
}
