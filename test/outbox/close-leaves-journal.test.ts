/**
 * A connector closed while it follows a run (a CLI command ending, a SIGTERM) leaves the run's journal
 * and its deliveries to the next owner: they stay `following` and pending, their leases lapse, and
 * another replica or process takes them over and delivers every event (v0.22: the next process resumes
 * the stream where the journal ends). test/cli/invoke-journal.test.ts catches the race this guards against.
 */
import { describe, expect, it } from 'vitest';
import { createHermesConnector } from 'aip-connector-hermes-agent';
import { journalStoreOf } from '../../src/journal/types.js';
import { deliveryEnded, httpTarget, startReceiver } from '../helpers/delivery-target.js';
import { API_KEY, checkedConnector, ENDPOINT, eventually, harnessFactory } from '../helpers/harness.js';
import { DURABLE_BACKENDS } from '../helpers/ledgers.js';

const harness = harnessFactory({ simulator: { streamLookupMs: 100 } });
const slowRun = [
  { type: 'delta', text: 'one ' },
  { type: 'sleep', ms: 1500 },
  { type: 'complete', output: 'one two' },
];

describe.each(DURABLE_BACKENDS)('closing a connector that follows a run, on $name', (backend) => {
  it('leaves the journal following and its delivery pending; the next connector delivers every event', async () => {
    const store = await backend.create();
    const receiver = await startReceiver();
    receiver.otherwise = 'hang';
    const journal = { leaseMs: 200 };
    const delivery = { leaseMs: 200, attemptTimeoutMs: 60_000 };
    const h = await harness({
      simulator: { profile: 'v0.22' },
      connector: { ledger: store.ledger, journal, delivery, eventTargets: [httpTarget(receiver.url)] },
    });
    const runId = await h.startRun({ input: 'closed mid-run', sim_script: slowRun });
    await eventually(() => receiver.requests >= 1, 'an attempt is in flight when the connector closes');
    await h.connector.close();
    const key = { tenant_id: null, endpoint_id: ENDPOINT, run_id: runId };
    const left = await journalStoreOf(store.ledger)?.journal(key);
    expect(left?.state, JSON.stringify(left)).toBe('following');

    receiver.otherwise = 'ok';
    const next = checkedConnector(
      createHermesConnector({
        endpoints: [{ id: ENDPOINT, baseUrl: h.sim.url, apiKey: API_KEY }],
        ledger: store.open(),
        journal,
        delivery,
        eventTargets: [httpTarget(receiver.url)],
      }),
    );
    try {
      const record = await deliveryEnded(next.connector, runId);
      expect(record.state).toBe('delivered');
      const sequences = [...new Set(receiver.received.filter((event) => event.run_id === runId).map((event) => event.sequence))];
      expect(sequences).toEqual((h.sim.run(runId)?.events ?? []).map((_, index) => index + 1));
      const ended = await journalStoreOf(store.ledger)?.journal(key);
      expect(ended?.state, JSON.stringify(ended)).toBe('complete');
    } finally {
      await next.connector.close();
    }
  });
});
