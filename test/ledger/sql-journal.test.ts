/**
 * The journal store of the SQL ledgers, on a real SQLite file and real PostgreSQL: a journal is
 * changed only by its owner, appends are idempotent per sequence, takeovers are compare-and-set,
 * and purge spares journals still being followed.
 */
import { describe, expect, it } from 'vitest';
import { journalStoreOf, type JournalKey, type JournalScope, type JournalStore } from '../../src/journal/types.js';
import { DURABLE_BACKENDS } from '../helpers/ledgers.js';
import { nextId } from '../helpers/harness.js';

/** Every journal of endpoint `local`, of any tenant (an unbound endpoint). */
const LOCAL: JournalScope[] = [{ endpoint_id: 'local' }];
const event = (text: string) => ({ event: 'message.delta', data: { delta: text } });
const append = (first: number, ...texts: string[]) => ({
  entries: texts.map((text, index) => ({ sequence: first + index, event: event(text) })),
  bytes: texts.length * 10,
  last_hermes_seq: null,
});

describe.each(DURABLE_BACKENDS)('journal store on $name', (backend) => {
  const opened = async () => {
    const store = await backend.create();
    const journals = [store.ledger, store.open()].map((ledger) => journalStoreOf(ledger) as JournalStore);
    return { a: journals[0] as JournalStore, b: journals[1] as JournalStore };
  };
  const key = (): JournalKey => ({ tenant_id: 'tenant-a', endpoint_id: 'local', run_id: nextId('run') });
  const texts = async (store: JournalStore, journal: JournalKey) => (await store.events(journal, 0, 100)).map((entry) => entry.event.data['delta']);

  it("a former owner's append stores nothing once another replica took the journal over", async () => {
    const { a, b } = await opened();
    const journal = key();
    expect(await a.create(journal, 'owner-a', 1000, 2000)).toBe(true);
    expect(await a.create(journal, 'owner-x', 1000, 2000)).toBe(false);
    expect(await a.append(journal, 'owner-a', append(1, 'one'))).toBe(true);
    const taken = await b.takeOver('owner-b', 2001, 9000, 10, LOCAL);
    expect(taken.map((record) => [record.run_id, record.owner, record.next_sequence])).toEqual([[journal.run_id, 'owner-b', 2]]);
    expect(await a.append(journal, 'owner-a', append(2, 'late'))).toBe(false);
    expect(await a.close(journal, 'owner-a', { state: 'complete', reason: 'run.completed', now: 3000 })).toBe(false);
    expect(await b.append(journal, 'owner-b', append(2, 'two'))).toBe(true);
    expect(await texts(b, journal)).toEqual(['one', 'two']);
  });

  it('an append repeated after a takeover cannot store a sequence twice', async () => {
    const { a } = await opened();
    const journal = key();
    await a.create(journal, 'owner-a', 1000, 2000);
    await a.append(journal, 'owner-a', append(1, 'one', 'two'));
    expect(await a.append(journal, 'owner-a', append(2, 'two again', 'three'))).toBe(true);
    expect(await texts(a, journal)).toEqual(['one', 'two', 'three']);
  });

  it('of two replicas sweeping at once, each expired journal goes to exactly one', async () => {
    const { a, b } = await opened();
    const journals = Array.from({ length: 6 }, key);
    for (const journal of journals) await a.create(journal, 'dead', 1000, 2000);
    const [byA, byB] = await Promise.all([a.takeOver('replica-a', 5000, 9000, 100, LOCAL), b.takeOver('replica-b', 5000, 9000, 100, LOCAL)]);
    const mine = (records: Array<{ run_id: string }>) => records.map((record) => record.run_id).filter((id) => journals.some((j) => j.run_id === id));
    expect([...mine(byA), ...mine(byB)].sort()).toEqual(journals.map((journal) => journal.run_id).sort());
    expect(mine(byA).filter((id) => mine(byB).includes(id))).toEqual([]);
  });

  it("a replica takes over only its own endpoints' journals", async () => {
    const { a, b } = await opened();
    const ours = key();
    const theirs = { ...key(), endpoint_id: 'elsewhere' };
    for (const journal of [ours, theirs]) await a.create(journal, 'dead', 1000, 2000);
    const taken = await b.takeOver('replica-b', 5000, 9000, 100, [...LOCAL, { endpoint_id: 'third' }]);
    expect(taken.map((record) => record.run_id)).toEqual([ours.run_id]);
    expect((await b.journal(theirs))?.owner).toBe('dead');
    expect(await b.takeOver('replica-b', 5000, 9000, 100, [])).toEqual([]);
  });

  it("an endpoint bound to a tenant takes over and purges only that tenant's journals of it; the others' stay untouched", async () => {
    const { a, b } = await opened();
    const tenantA = key();
    const [tenantB, noTenant] = [
      { ...key(), tenant_id: 'tenant-b' },
      { ...key(), tenant_id: null },
    ];
    for (const journal of [tenantA, tenantB, noTenant]) await a.create(journal, 'dead', 1000, 2000);
    const before = await Promise.all([tenantB, noTenant].map((journal) => b.journal(journal)));
    const taken = await b.takeOver('replica-a', 5000, 9000, 100, [{ endpoint_id: 'local', tenant_id: 'tenant-a' }]);
    expect(taken.map((record) => record.run_id)).toEqual([tenantA.run_id]);
    expect(await Promise.all([tenantB, noTenant].map((journal) => b.journal(journal)))).toEqual(before);

    const closed = { state: 'complete', reason: 'run.completed', now: 6000 } as const;
    expect(await b.close(tenantA, 'replica-a', closed)).toBe(true);
    // A journal another tenant's follower closed: past any retention, it is that tenant's to purge.
    expect(await b.takeOver('replica-b', 5000, 9000, 100, [{ endpoint_id: 'local', tenant_id: 'tenant-b' }])).toHaveLength(1);
    expect(await b.close(tenantB, 'replica-b', closed)).toBe(true);
    expect(await b.purge(7000, [{ endpoint_id: 'local', tenant_id: 'tenant-a' }], 7000)).toBe(1);
    expect(await b.journal(tenantA)).toBeNull();
    expect((await b.journal(tenantB))?.state).toBe('complete');
  });

  it('purge deletes closed journals past retention with their events, and spares the rest', async () => {
    const { a } = await opened();
    const [old, recent, following] = [key(), key(), key()];
    for (const journal of [old, recent, following]) {
      await a.create(journal, 'owner', 1000, 1_000_000);
      await a.append(journal, 'owner', append(1, 'x'));
    }
    await a.close(old, 'owner', { state: 'complete', reason: 'run.completed', now: 2000 });
    await a.close(recent, 'owner', { state: 'complete', reason: 'run.completed', now: 8000 });
    expect(await a.purge(5000, LOCAL, 5000)).toBeGreaterThanOrEqual(1);
    expect(await a.journal(old)).toBeNull();
    expect(await a.events(old, 0, 10)).toEqual([]);
    expect((await a.journal(recent))?.state).toBe('complete');
    expect((await a.journal(following))?.state).toBe('following');
    expect(await texts(a, following)).toEqual(['x']);
  });

  it('a subscriber hears of an append and a close committed through another ledger of the same database', async () => {
    const { a, b } = await opened();
    const journal = key();
    await a.create(journal, 'owner', 1000, 1_000_000);
    let heard = 0;
    let wake: () => void = () => undefined;
    const unsubscribe = b.subscribe(journal, () => {
      heard++;
      wake();
    });
    try {
      const changed = () => new Promise<void>((resolve) => (wake = resolve));
      const first = changed();
      await a.append(journal, 'owner', append(1, 'one'));
      await first;
      const second = changed();
      await a.close(journal, 'owner', { state: 'complete', reason: 'run.completed', now: 2000 });
      await second;
      expect(heard).toBeGreaterThanOrEqual(2);
    } finally {
      unsubscribe();
    }
  });
});
