/**
 * A delivery pass whose ledger call never settles (a PostgreSQL query on a connection that died can
 * hang: seen once in ten crash tortures, four deliveries held without progress while their leases were
 * renewed) is given up after attemptTimeoutMs + 2 × leaseMs, and the next sweep drives the delivery again.
 */
import { describe, expect, it } from 'vitest';
import type { DeliveryRecord, RunLedger } from 'aip-connector-hermes-agent';
import { DELIVERY_STORE } from '../../src/outbox/types.js';
import { deliveryEnded, httpTarget, startReceiver } from '../helpers/delivery-target.js';
import { harnessFactory, script } from '../helpers/harness.js';
import { DURABLE_BACKENDS } from '../helpers/ledgers.js';

const harness = harnessFactory({ simulator: { streamLookupMs: 100 } });

type DeliveryRead = (...args: unknown[]) => Promise<DeliveryRecord | null>;

/** The ledger, its outbox's first read of a delivery never answering. */
function firstReadHangs(ledger: RunLedger): { ledger: RunLedger; hung: () => boolean } {
  const store = (ledger as unknown as Record<symbol, Record<string, unknown>>)[DELIVERY_STORE] as Record<string, unknown>;
  let hung = false;
  const read = (store.delivery as DeliveryRead).bind(store);
  const stuckStore = new Proxy(store, {
    get(inner, property) {
      if (property === 'delivery') return (...args: unknown[]) => (hung ? read(...args) : ((hung = true), new Promise<never>(() => undefined)));
      const value: unknown = Reflect.get(inner, property);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(inner) : value;
    },
  });
  const proxied = new Proxy(ledger, {
    get(inner, property) {
      if (property === DELIVERY_STORE) return stuckStore;
      const value: unknown = Reflect.get(inner, property);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(inner) : value;
    },
  });
  return { ledger: proxied, hung: () => hung };
}

describe.each(DURABLE_BACKENDS)('a stuck delivery pass on $name', (backend) => {
  it('is given up past its deadline, and the delivery is driven again and completed', async () => {
    const store = await backend.create();
    const receiver = await startReceiver();
    const stuck = firstReadHangs(store.ledger);
    const h = await harness({
      connector: { ledger: stuck.ledger, journal: {}, delivery: { attemptTimeoutMs: 200, leaseMs: 200 }, eventTargets: [httpTarget(receiver.url)] },
    });
    const runId = await h.startRun({ input: 'stuck', sim_script: script.quick() });
    const record = await deliveryEnded(h.connector, runId, 300);
    expect(stuck.hung()).toBe(true);
    expect(record.state).toBe('delivered');
    const sequences = [...new Set(receiver.received.filter((event) => event.run_id === runId).map((event) => event.sequence))];
    expect(sequences).toEqual((h.sim.run(runId)?.events ?? []).map((_, index) => index + 1));
  });
});
