/**
 * Two connectors (replicas) on one ledger share a delivery target: the one delivering a run closes
 * mid-delivery, the other takes the delivery over when its lease lapses and finishes it. Every event
 * arrives at least once, in order per run, and a duplicate always carries the same id.
 */
import { describe, expect, it } from 'vitest';
import { createHermesConnector } from 'aip-connector-hermes-agent';
import { API_KEY, checkedConnector, ENDPOINT, eventually, harnessFactory, type Harness } from '../helpers/harness.js';
import { deliveryEnded, httpTarget, receivedFor, startReceiver } from '../helpers/delivery-target.js';
import { DURABLE_BACKENDS } from '../helpers/ledgers.js';

const harness = harnessFactory({ simulator: { streamLookupMs: 100 } });
const simulatedNames = (h: Harness, runId: string) => (h.sim.run(runId)?.events ?? []).map((event) => event['event']);
const slowScript = [
  { type: 'delta', text: 'one ' },
  { type: 'delta', text: 'two ' },
  { type: 'sleep', ms: 800 },
  { type: 'delta', text: 'three' },
  { type: 'complete', output: 'one two three' },
];

describe.each(DURABLE_BACKENDS)('outbox replicas on $name', (backend) => {
  it('a replica closing mid-delivery leaves the run to the other, which delivers every event in order; duplicates keep their id', async () => {
    const store = await backend.create();
    const receiver = await startReceiver();
    const options = { journal: { leaseMs: 300 }, delivery: { leaseMs: 300 } };
    const h = await harness({ connector: { ledger: store.ledger, ...options, eventTargets: [httpTarget(receiver.url)] } });
    const other = checkedConnector(
      createHermesConnector({
        endpoints: [{ id: ENDPOINT, baseUrl: h.sim.url, apiKey: API_KEY }],
        ledger: store.open(),
        ...options,
        eventTargets: [httpTarget(receiver.url)],
      }),
    );
    try {
      // The first replica's first attempt hangs at the receiver: it is in flight when that replica closes.
      receiver.answers.push('hang');
      const runId = await h.startRun({ input: 'slow', sim_script: slowScript });
      await eventually(() => receiver.requests >= 1, 'the first attempt reached the receiver');
      await h.connector.close();
      const record = await deliveryEnded(other.connector, runId);
      expect(record.state).toBe('delivered');
      const received = receivedFor(receiver, runId);
      const firsts = [...new Map(received.map((event) => [event.sequence, event])).values()];
      expect(firsts.map((event) => event.event)).toEqual(simulatedNames(h, runId));
      expect(firsts.map((event) => event.sequence)).toEqual(firsts.map((_, index) => index + 1));
      // Order per run: each batch starts where the delivered ones ended (a redelivery starts again at a batch's start).
      const ids = new Map(firsts.map((event) => [event.sequence, event.id]));
      for (const event of received) expect(event.id).toBe(ids.get(event.sequence));
      expect(record.owner).toBeNull();
    } finally {
      await other.connector.close();
    }
  });
});
