/**
 * Delivery never stands in an action's way: with a target that never answers, runs still start
 * (their outbox rows are written in the journal's transaction, nothing is sent on the start's path),
 * and the target sees at most `concurrencyPerTarget` attempts at once.
 */
import { describe, expect, it } from 'vitest';
import { eventually, harnessFactory, script } from '../helpers/harness.js';
import { deliveryEnded, httpTarget, startReceiver } from '../helpers/delivery-target.js';
import { DURABLE_BACKENDS } from '../helpers/ledgers.js';

const harness = harnessFactory({ simulator: { streamLookupMs: 100 } });

describe.each(DURABLE_BACKENDS)('a hanging target on $name', (backend) => {
  it('does not hold up run_start, and gets one attempt at a time with concurrencyPerTarget 1', async () => {
    const store = await backend.create();
    const receiver = await startReceiver();
    receiver.otherwise = 'hang';
    const target = httpTarget(receiver.url);
    const h = await harness({
      connector: { ledger: store.ledger, journal: {}, delivery: { concurrencyPerTarget: 1, attemptTimeoutMs: 300_000 }, eventTargets: [target] },
    });
    const runs = [];
    for (let index = 0; index < 4; index++) runs.push(await h.startRun({ input: `run ${index}`, sim_script: script.quick() }));
    expect(new Set(runs).size).toBe(4);
    await eventually(() => receiver.requests >= 1, 'the first attempt reached the target');
    expect(target.calls).toBe(1);
    expect(target.inFlight).toBe(1);
    const pending = await h.connector.deliveries(undefined, { state: 'pending' });
    expect(pending.map((record) => record.run_id).sort()).toEqual([...runs].sort());
  });

  it('stops waiting for a target that ignores the abort: its attempts time out as retries, and the delivery is given up at maxAgeMs', async () => {
    const store = await backend.create();
    let calls = 0;
    const deaf = { id: 'deaf', maxBatch: 10, accepts: () => true, deliver: () => (calls++, new Promise<never>(() => undefined)) };
    const h = await harness({ connector: { ledger: store.ledger, journal: {}, delivery: { attemptTimeoutMs: 100, maxAgeMs: 1000 }, eventTargets: [deaf] } });
    const runId = await h.startRun({ input: 'deaf', sim_script: script.quick() });
    const record = await deliveryEnded(h.connector, runId);
    expect(record).toMatchObject({ state: 'given_up', given_up_reason: 'max_age', last_error: 'attempt_timeout' });
    expect(calls).toBeGreaterThanOrEqual(2);
  });
});
