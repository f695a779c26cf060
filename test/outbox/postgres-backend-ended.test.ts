/**
 * PostgreSQL backends ended mid-delivery (pg_terminate_backend of every connection of the ledger,
 * its LISTEN connection included, while the target holds a batch): the deliverer's writes fail,
 * nothing crashes, and delivery resumes by itself. Every journaled event reaches the target, in
 * order; a batch whose advance was lost is sent again with the same ids.
 */
import { describe, expect, it } from 'vitest';
import { createPostgresLedger, type DeliveryTarget, type OutboxEvent } from 'aip-connector-hermes-agent';
import { journalStoreOf, type JournalStore } from '../../src/journal/types.js';
import { deliveryEnded } from '../helpers/delivery-target.js';
import { harnessFactory, script } from '../helpers/harness.js';
import { PG_URL, createPgSchema } from '../helpers/ledgers.js';
import { pgAdmin } from '../helpers/pg-schema.js';

const harness = harnessFactory({ simulator: { streamLookupMs: 100 } });

describe.skipIf(!PG_URL)('outbox on PostgreSQL with its backends ended', () => {
  it('resumes delivery after every backend of the ledger is ended during attempts, losing and reordering nothing', async () => {
    const { connectionString, drop } = await createPgSchema('aip_outbox_end');
    const application = `outbox_end_${process.pid}_${Date.now()}`;
    const url = new URL(connectionString);
    url.searchParams.set('application_name', application);
    const ledger = createPostgresLedger({ connectionString: url.toString() });
    let ends = 0;
    let terminated = 0;
    const received: OutboxEvent[] = [];
    const target: DeliveryTarget = {
      id: 'recorder',
      maxBatch: 1,
      accepts: () => true,
      async deliver(events) {
        if (ends < 3) {
          ends++;
          terminated += (await pgAdmin(connectionString, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '${application}'`))
            .length;
        }
        received.push(...events);
        return { kind: 'delivered' };
      },
    };
    const h = await harness({ connector: { ledger, journal: { leaseMs: 300 }, delivery: { leaseMs: 300 }, eventTargets: [target] } });
    try {
      const runId = await h.startRun({ input: 'hello', sim_script: script.quick() });
      const record = await deliveryEnded(h.connector, runId);
      expect(record.state).toBe('delivered');
      expect(ends).toBe(3);
      expect(terminated).toBeGreaterThanOrEqual(3);
      const journaled = await (journalStoreOf(ledger) as JournalStore).events({ tenant_id: null, endpoint_id: 'local', run_id: runId }, 0, 1000);
      const firsts = [...new Map(received.map((event) => [event.sequence, event])).values()];
      expect(firsts.map((event) => event.sequence)).toEqual(journaled.map((entry) => entry.sequence));
      expect(firsts.map((event) => event.event.event)).toEqual(journaled.map((entry) => entry.event.event));
      // Sent again only from where the delivered ones ended, and with the same ids.
      const ids = new Map(firsts.map((event) => [event.sequence, event.id]));
      for (const event of received) expect(event.id).toBe(ids.get(event.sequence));
      expect(record.delivered_through).toBe(journaled.length);
    } finally {
      await h.close();
      await ledger.close();
      await drop();
    }
  });
});
