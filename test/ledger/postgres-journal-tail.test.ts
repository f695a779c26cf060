/**
 * A run journal read live on another replica through PostgreSQL LISTEN/NOTIFY, and the listening
 * connection ended under it (pg_terminate_backend): the process does not crash, the listener
 * reconnects, and the reader gets every event. The reader's safety re-read is set to a minute, far
 * past the test's bound, so only a notification (or the reconnect's re-read) can finish it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createHermesConnector, createPostgresLedger, type RunEventsOutput } from 'aip-connector-hermes-agent';
import { API_KEY, checkedConnector, ENDPOINT, eventually, grantFor, harnessFactory, nextId, script } from '../helpers/harness.js';
import { connectPg } from '../helpers/pg-schema.js';
import { createPgSchema, PG_URL } from '../helpers/ledgers.js';

const harness = harnessFactory({ simulator: { streamLookupMs: 100 } });
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe.skipIf(!PG_URL)('run journal tailing across PostgreSQL replicas', () => {
  it("a reader on another replica follows the run live, through a kill of its listener's backend", async () => {
    const schema = await createPgSchema('aip_journal_tail');
    cleanups.push(schema.drop);
    const application = `aip_journal_tail_${process.pid}`;
    const readerUrl = new URL(schema.connectionString);
    readerUrl.searchParams.set('application_name', application);
    const ledgerA = createPostgresLedger({ connectionString: schema.connectionString });
    const ledgerB = createPostgresLedger({ connectionString: readerUrl.toString() });
    cleanups.push(
      () => ledgerA.close(),
      () => ledgerB.close(),
    );
    const h = await harness({ connector: { ledger: ledgerA, journal: { leaseMs: 1000 } } });
    const b = checkedConnector(
      createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: h.sim.url, apiKey: API_KEY }], ledger: ledgerB, journal: { leaseMs: 60_000 } }),
    );
    cleanups.push(() => b.connector.close());
    const admin = await connectPg(schema.connectionString);
    cleanups.push(() => admin.end());

    const runId = await h.startRun({ input: 'wait for me', sim_script: script.approval() });
    const reading = b.invoke({ capability_id: b.cap('run_events'), input: { run_id: runId } });
    const listener = await eventually(async () => {
      const rows = await admin.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'", [application]);
      return rows.rows[0]?.pid;
    }, "the reader's LISTEN connection");
    await admin.query('SELECT pg_terminate_backend($1)', [listener]);
    await eventually(async () => (await admin.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [listener])).rowCount === 0, 'the listener gone');

    const approval = { run_id: runId, choice: 'once' };
    const approved = await h.invoke(
      { capability_id: h.cap('run_approval'), input: approval, idempotency_key: nextId('key') },
      { approval: grantFor(approval) },
    );
    expect(approved.status, JSON.stringify(approved.error)).toBe('completed');

    const result = await reading;
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    const events = (result.output as RunEventsOutput).events.map((event) => event.event);
    expect(events).toEqual(h.sim.run(runId)?.events.map((event) => event['event']));
    expect(events).toContain('approval.responded');
  });
});
