import { afterEach, describe, expect, it } from 'vitest';
import { call, closeSims, scripted, startRun, startSim } from './support.js';

afterEach(closeSims);

const LONG = scripted([{ type: 'sleep', ms: 60_000 }]);

describe('later profile: 202 and Idempotency-Key', () => {
  it('adds "replayed": false to a fresh 202 and ignores Idempotency-Key at the pin', async () => {
    const later = await startSim({ profile: 'later' });
    const fresh = await call(later, 'POST', '/v1/runs', { body: '{"input": "hi"}' });
    expect(fresh.text).toMatch(/^\{"run_id": "run_[0-9a-f]{32}", "status": "started", "replayed": false\}$/);

    const pin = await startSim();
    const headers = { 'Idempotency-Key': 'k1' };
    const one = await call(pin, 'POST', '/v1/runs', { body: '{"input": "hi"}', headers });
    const two = await call(pin, 'POST', '/v1/runs', { body: '{"input": "hi"}', headers });
    expect(JSON.parse(one.text).run_id).not.toBe(JSON.parse(two.text).run_id);
    expect(pin.startCount()).toBe(2);
  });

  it('replays the same payload, even with the gate full', async () => {
    const sim = await startSim({ profile: 'later', maxConcurrentRuns: 1 });
    const headers = { 'Idempotency-Key': 'order-42', 'X-Hermes-Session-Key': 'support:demo' };
    const body = JSON.stringify({ ...LONG, session_id: 's' });
    const first = await call(sim, 'POST', '/v1/runs', { body, headers });
    expect(first.status).toBe(202);
    const runId = JSON.parse(first.text).run_id as string;
    // Same JSON, different key order and spacing: same canonical fingerprint.
    const reordered = JSON.stringify({ session_id: 's', ...LONG }, null, 2);
    const replay = await call(sim, 'POST', '/v1/runs', { body: reordered, headers });
    expect(replay.status).toBe(202);
    expect(replay.headers['idempotency-replayed']).toBe('true');
    expect(replay.headers['x-hermes-session-key']).toBe('support:demo');
    expect(replay.text).toBe(`{"run_id": "${runId}", "status": "started", "replayed": true}`);
    expect(sim.startCount()).toBe(1);
    expect(sim.run(runId)?.idempotencyKey).toBe('order-42');
    expect((await call(sim, 'POST', '/v1/runs', { body: '{"input": "other"}' })).status).toBe(429);
  });

  it('answers 409 idempotency_key_conflict for another payload or another session key', async () => {
    const sim = await startSim({ profile: 'later' });
    await startRun(sim, { input: 'hi' }, { 'Idempotency-Key': 'k' });
    for (const [body, extra] of [
      ['{"input": "changed"}', {}],
      ['{"input": "hi"}', { 'X-Hermes-Session-Key': 'other' }],
    ] as const) {
      const answer = await call(sim, 'POST', '/v1/runs', { body, headers: { 'Idempotency-Key': 'k', ...extra } });
      expect(answer.status).toBe(409);
      expect(JSON.parse(answer.text).error).toMatchObject({ code: 'idempotency_key_conflict', param: null, type: 'invalid_request_error' });
    }
    expect(sim.startCount()).toBe(1);
  });

  it('rejects keys that are not 1-255 visible ASCII characters', async () => {
    const sim = await startSim({ profile: 'later' });
    for (const key of ['', 'has space', 'x'.repeat(256)]) {
      const answer = await call(sim, 'POST', '/v1/runs', { body: '{"input": "hi"}', headers: { 'Idempotency-Key': key } });
      expect(answer.status).toBe(400);
      expect(JSON.parse(answer.text).error.code).toBe('invalid_idempotency_key');
    }
    expect((await call(sim, 'POST', '/v1/runs', { body: '{"input": "hi"}', headers: { 'Idempotency-Key': 'x'.repeat(255) } })).status).toBe(202);
  });
});
