/**
 * A journal create that committed but whose answer was lost (a PostgreSQL backend ended on the
 * commit; found by the crash torture): run_start's begin() throws, yet the journal and its deliveries
 * exist, owned by this replica, whose lease renewal keeps them from every takeover. The replica must
 * find them at its next sweep, follow the run and deliver every event, instead of holding them
 * unfollowed until the process ends.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSqliteLedger, type DeliveryTarget, type OutboxEvent, type RunLedger } from 'aip-connector-hermes-agent';
import { JOURNAL_STORE, type JournalStore } from '../../src/journal/types.js';
import { deliveryEnded } from '../helpers/delivery-target.js';
import { harnessFactory, script } from '../helpers/harness.js';

const harness = harnessFactory({});

/** The ledger, with a journal store whose first create commits and then throws, as a lost commit answer does. */
function losingFirstCreateAnswer(ledger: RunLedger): RunLedger {
  const store = (ledger as unknown as Record<symbol, JournalStore>)[JOURNAL_STORE] as JournalStore;
  let lost = false;
  const losing = new Proxy(store, {
    get(inner, property) {
      const value: unknown = Reflect.get(inner, property);
      if (property !== 'create') return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(inner) : value;
      return async (...args: Parameters<JournalStore['create']>) => {
        const created = await inner.create(...args);
        if (lost) return created;
        lost = true;
        throw new Error('Connection terminated unexpectedly');
      };
    },
  });
  return new Proxy(ledger, {
    get(inner, property) {
      if (property === JOURNAL_STORE) return losing;
      const value: unknown = Reflect.get(inner, property);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(inner) : value;
    },
  });
}

describe('a journal create whose answer was lost', () => {
  it('is found at the next sweep: the run is followed and every event delivered', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'aip-uncertain-create-'));
    const ledger = createSqliteLedger({ path: join(folder, 'ledger.db') });
    const received: OutboxEvent[] = [];
    const target: DeliveryTarget = {
      id: 'recorder',
      maxBatch: 10,
      accepts: () => true,
      async deliver(events) {
        received.push(...events);
        return { kind: 'delivered' };
      },
    };
    const h = await harness({
      connector: { ledger: losingFirstCreateAnswer(ledger), journal: { leaseMs: 200 }, delivery: { leaseMs: 200 }, eventTargets: [target] },
    });
    try {
      const runId = await h.startRun({ input: 'hello', sim_script: script.quick() });
      const record = await deliveryEnded(h.connector, runId);
      expect(record.state).toBe('delivered');
      const key = { tenant_id: null, endpoint_id: 'local', run_id: runId };
      const store = (ledger as unknown as Record<symbol, JournalStore>)[JOURNAL_STORE] as JournalStore;
      expect((await store.journal(key))?.state).not.toBe('following');
      const journaled = await store.events(key, 0, 1000);
      expect(journaled.length).toBeGreaterThan(0);
      expect(received.map((event) => event.sequence)).toEqual(journaled.map((entry) => entry.sequence));
    } finally {
      await h.close();
      await ledger.close();
      rmSync(folder, { recursive: true, force: true });
    }
  });
});
