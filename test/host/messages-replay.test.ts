/**
 * The replay guard through the handler on each durable ledger (SQLite, and PostgreSQL when
 * configured): a message replayed after a restart of the host is refused without reaching
 * Hermes, the same message raced against itself executes once, and a message accepted once is
 * refused up to the last millisecond of its window, by any host sharing the ledger.
 */
import { describe, expect, it } from 'vitest';
import { REPLAY_WINDOW_MS } from '../../src/host/replay.js';
import { rfc3339 } from '../../src/host/wire/time.js';
import { DURABLE_BACKENDS } from '../helpers/ledgers.js';
import { actionEnvelope, actionId, cap, errorOf, resultOf, signed, startHost } from './messages-support.js';

describe.each(DURABLE_BACKENDS)('replayed messages: $name', (backend) => {
  it('after a restart (a new host over the same ledger) the replayed run_start is a 409 and Hermes sees no second start', async () => {
    const store = await backend.create();
    const before = await startHost({ ledger: store.ledger });
    const id = actionId();
    const text = signed(actionEnvelope(before, { id, capability_id: cap('run_start'), input: { body: { input: 'hi' } }, idempotency_key: `k-${id}` }));
    expect((await before.post(text)).status).toBe(200);
    await before.connector.close();
    await store.ledger.close();

    const after = await startHost({ ledger: store.open(), sim: before.sim });
    const replayed = await after.post(text);
    expect(replayed.status).toBe(409);
    expect(errorOf(replayed)).toMatchObject({ code: 'connector_host.replay', category: 'policy' });
    expect(before.sim.startCount()).toBe(1);
  });

  it('one signed message sent twice at once: one executes, the other is a replay', async () => {
    const host = await startHost({ ledger: (await backend.create()).ledger });
    const text = signed(actionEnvelope(host, { id: actionId(), capability_id: cap('run_status'), input: { run_id: 'run_x' } }));
    const answers = await Promise.all([host.post(text), host.post(text)]);
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 409]);
    expect(answers.filter((answer) => answer.status === 200).map((answer) => resultOf(answer).status)).toEqual(['failed']);
  });

  it('at exactly sent_at + 300 s (the window’s inclusive end) an executed message is a 409, here and on a host sharing the ledger; Hermes is read once', async () => {
    // The connector's own clock is the real one: the action's deadline (host clock + timeout) must lie ahead of it.
    const sentAt = Date.now();
    const clock = { now: sentAt };
    const store = await backend.create();
    const first = await startHost({ ledger: store.ledger, now: () => clock.now });
    const runId = `run_boundary_${actionId().slice(4)}`;
    const envelope = actionEnvelope(first, { id: actionId(), capability_id: cap('run_status'), input: { run_id: runId } });
    const text = signed({ ...envelope, sent_at: rfc3339(sentAt) });
    expect((await first.post(text)).status).toBe(200);

    clock.now = sentAt + REPLAY_WINDOW_MS;
    // A second host over the same ledger purges expired claims on its first message: this one must not be among them.
    const second = await startHost({ ledger: store.ledger, sim: first.sim, now: () => clock.now });
    for (const host of [second, first]) {
      const replayed = await host.post(text);
      expect(replayed.status).toBe(409);
      expect(errorOf(replayed)).toMatchObject({ code: 'connector_host.replay', category: 'policy' });
    }
    clock.now = sentAt + REPLAY_WINDOW_MS + 1;
    expect((await first.post(text)).status).toBe(409);
    expect(first.sim.requests.filter((request) => request.path === `/v1/runs/${runId}`)).toHaveLength(1);
  });
});
