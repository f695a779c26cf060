/**
 * The outbox of the SQL ledgers, on a real SQLite file and real PostgreSQL: delivery rows are
 * created with their journal and queued by its appends in the same transactions, the bound gives a
 * new run's delivery up instead of blocking it, takeovers are compare-and-set, and the journal's
 * purge gives up what it takes away.
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { journalStoreOf, type JournalDeliveries, type JournalKey, type JournalScope, type JournalStore } from '../../src/journal/types.js';
import { deliveryStoreOf, type DeliveryStore } from '../../src/outbox/types.js';
import { nextId } from '../helpers/harness.js';
import { INSPECTABLE_BACKENDS, type InspectableStore } from '../helpers/ledger-stores.js';

const LOCAL: JournalScope[] = [{ endpoint_id: 'local' }];
const append = (first: number, count: number) => ({
  entries: Array.from({ length: count }, (_, index) => ({ sequence: first + index, event: { event: 'message.delta', data: { delta: `${first + index}` } } })),
  bytes: count * 10,
  last_hermes_seq: null,
});

/** Runs DDL against the store outside any ledger (a fault injected into the database). */
async function execute(store: InspectableStore, sqlite: string, postgres: string): Promise<void> {
  if (store.name === 'postgres') {
    await store.query(postgres);
    return;
  }
  const db = new Database(store.env.LEDGER_SQLITE_PATH as string);
  try {
    db.exec(sqlite);
  } finally {
    db.close();
  }
}

describe.each(INSPECTABLE_BACKENDS)('outbox store on $name', (backend) => {
  const opened = async () => {
    const store = await backend.create();
    const ledgers = [store.open(), store.open()];
    const journals = ledgers.map((ledger) => journalStoreOf(ledger) as JournalStore);
    const outboxes = ledgers.map((ledger) => deliveryStoreOf(ledger) as DeliveryStore);
    return { store, journal: journals[0] as JournalStore, a: outboxes[0] as DeliveryStore, b: outboxes[1] as DeliveryStore };
  };
  const key = (): JournalKey => ({ tenant_id: 'tenant-a', endpoint_id: 'local', run_id: nextId('run') });
  const plan = (targetIds: string[], maxPendingPerTarget = 100): JournalDeliveries => ({
    owner: 'deliverer-a',
    leaseExpiresAt: 2000,
    targetIds,
    maxPendingPerTarget,
  });

  it('creates one held row per target with the journal, and every append queues its events for them in its own transaction', async () => {
    const { journal, a } = await opened();
    const run = key();
    const [one, two] = [nextId('target'), nextId('target')];
    expect(await journal.create(run, 'follower', 1000, 2000, plan([one, two]))).toBe(true);
    expect(await journal.append(run, 'follower', append(1, 3))).toBe(true);
    const rows = await a.list({ run_id: run.run_id, limit: 10 });
    expect(rows.map((row) => [row.target_id, row.state, row.owner, row.delivered_through, row.queued_through]).sort()).toEqual(
      [
        [one, 'pending', 'deliverer-a', 0, 3],
        [two, 'pending', 'deliverer-a', 0, 3],
      ].sort(),
    );
    // A former follower's late append is refused whole: no event, and nothing queued.
    expect(await journal.append(run, 'not-the-owner', append(4, 2))).toBe(false);
    expect(await journal.events(run, 0, 10)).toHaveLength(3);
    expect((await a.delivery(run, one))?.queued_through).toBe(3);
  });

  it('an append whose queuing fails stores no event either', async () => {
    const { store, journal, a } = await opened();
    const run = key();
    const target = nextId('target');
    await journal.create(run, 'follower', 1000, 2000, plan([target]));
    await journal.append(run, 'follower', append(1, 1));
    await execute(
      store,
      `CREATE TRIGGER refuse_queue BEFORE UPDATE OF queued_through ON run_deliveries BEGIN SELECT RAISE(ABORT, 'queue refused'); END`,
      `CREATE FUNCTION refuse_queue() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'queue refused'; END $$;
       CREATE TRIGGER refuse_queue BEFORE UPDATE OF queued_through ON run_deliveries FOR EACH ROW EXECUTE FUNCTION refuse_queue()`,
    );
    await expect(journal.append(run, 'follower', append(2, 2))).rejects.toThrow(/queue refused/);
    expect((await journal.events(run, 0, 10)).map((entry) => entry.sequence)).toEqual([1]);
    expect((await journal.journal(run))?.next_sequence).toBe(2);
    expect((await a.delivery(run, target))?.queued_through).toBe(1);
  });

  it('at maxPendingPerTarget open deliveries, a new run still starts, and its delivery is recorded as given up (outbox_full)', async () => {
    const { journal, a } = await opened();
    const [full, other] = [nextId('target'), nextId('target')];
    const runs = [key(), key(), key()];
    expect(await journal.create(runs[0] as JournalKey, 'follower', 1000, 2000, plan([full], 2))).toBe(true);
    expect(await journal.create(runs[1] as JournalKey, 'follower', 1000, 2000, plan([full], 2))).toBe(true);
    expect(await journal.create(runs[2] as JournalKey, 'follower', 1000, 2000, plan([full, other], 2))).toBe(true);
    const third = await a.delivery(runs[2] as JournalKey, full);
    expect(third).toMatchObject({ state: 'given_up', given_up_reason: 'outbox_full', owner: null });
    expect(third?.last_error).toMatch(/maxPendingPerTarget/);
    expect(await a.list({ target_id: full, state: 'pending', limit: 10 })).toHaveLength(2);
    // The bound is per target: the other one takes the run.
    expect((await a.delivery(runs[2] as JournalKey, other))?.state).toBe('pending');
  });

  it('a lapsed delivery is taken over by one replica of several, and its former holder can no longer advance it', async () => {
    const { journal, a, b } = await opened();
    const run = key();
    const target = nextId('target');
    await journal.create(run, 'follower', 1000, 2000, plan([target]));
    const [first, second] = await Promise.all([
      a.takeOver('replica-a', 3000, 9000, 10, [target], LOCAL),
      b.takeOver('replica-b', 3000, 9000, 10, [target], LOCAL),
    ]);
    expect([...(first ?? []), ...(second ?? [])]).toHaveLength(1);
    const taker = (first ?? []).length === 1 ? 'replica-a' : 'replica-b';
    expect(await a.advance(run, target, 'deliverer-a', 1, 3000)).toBe(false);
    expect(await a.advance(run, target, taker, 1, 3000)).toBe(true);
    expect(await b.finish(run, target, taker, { state: 'delivered', now: 4000 })).toBe(true);
    expect(await a.delivery(run, target)).toMatchObject({ state: 'delivered', delivered_through: 1, owner: null });
  });

  it('purge gives up a delivery whose journal it deletes (retention), and deletes ended deliveries past retention', async () => {
    const { journal, a } = await opened();
    const [open, done] = [key(), key()];
    const target = nextId('target');
    for (const run of [open, done]) {
      await journal.create(run, 'follower', 1000, 2000, plan([target]));
      await journal.append(run, 'follower', append(1, 2));
      await journal.close(run, 'follower', { state: 'complete', reason: 'run.completed', now: 2000 });
    }
    await a.advance(done, target, 'deliverer-a', 2, 2500);
    await a.finish(done, target, 'deliverer-a', { state: 'delivered', now: 2500 });
    expect(await journal.purge(3000, LOCAL, 5000)).toBe(2);
    expect(await a.delivery(open, target)).toMatchObject({ state: 'given_up', given_up_reason: 'retention', delivered_through: 0, queued_through: 2 });
    expect(await a.delivery(done, target)).toBeNull();
    // The retention evidence itself lives one more retention period.
    await journal.purge(3000, LOCAL, 6000);
    expect((await a.delivery(open, target))?.state).toBe('given_up');
    await journal.purge(5000, LOCAL, 9000);
    expect(await a.delivery(open, target)).toBeNull();
  });
});
