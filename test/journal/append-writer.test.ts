/**
 * The follower's append writer on a real SQLite journal store: one append in flight at a time, what
 * arrives meanwhile shares the next append, a burst past the buffer waits (back-pressure), and a
 * limit stops it after what it took before is written.
 */
import { describe, expect, it } from 'vitest';
import { AppendWriter, type WriterStop } from '../../src/journal/append-writer.js';
import { journalStoreOf, type JournalKey, type JournalStore } from '../../src/journal/types.js';
import { DURABLE_BACKENDS } from '../helpers/ledgers.js';
import { nextId } from '../helpers/harness.js';

const sqlite = DURABLE_BACKENDS.find((backend) => backend.name === 'sqlite');
const delta = (index: number) => ({ event: 'message.delta', data: { delta: `d${index}`, seq: index + 1 } });

async function writerOn(limits: { maxEvents: number; maxBytes: number }) {
  const store = journalStoreOf((await sqlite!.create()).ledger) as JournalStore;
  const key: JournalKey = { tenant_id: null, endpoint_id: 'local', run_id: nextId('run') };
  await store.create(key, 'owner', 1000, Number.MAX_SAFE_INTEGER);
  const appends: number[] = [];
  const counted: JournalStore = Object.create(store);
  counted.append = (journalKey, owner, append) => {
    appends.push(append.entries.length);
    return store.append(journalKey, owner, append);
  };
  const stops: WriterStop[] = [];
  const writer = new AppendWriter({
    store: counted,
    key,
    owner: 'owner',
    nextSequence: 1,
    bytes: 0,
    ...limits,
    seqOf: (event) => event.data['seq'] as number,
    onStop: (why) => stops.push(why),
  });
  return { store, key, writer, appends, stops };
}

describe('the journal append writer', () => {
  it('writes a burst in order in few appends, and makes the reader of the stream wait past its buffer', async () => {
    const { store, key, writer, appends } = await writerOn({ maxEvents: 10_000, maxBytes: 1 << 24 });
    const waits = Array.from({ length: 600 }, (_, index) => writer.push(delta(index)));
    expect(waits.slice(0, 255).every((wait) => wait === undefined)).toBe(true);
    expect(waits.filter((wait) => wait !== undefined).length).toBeGreaterThan(0);
    await Promise.all(waits);
    await writer.flushed();
    const stored = await store.events(key, 0, 1000);
    expect(stored.map((entry) => entry.sequence)).toEqual(Array.from({ length: 600 }, (_, index) => index + 1));
    expect(stored.map((entry) => entry.event.data['delta'])).toEqual(Array.from({ length: 600 }, (_, index) => `d${index}`));
    expect(appends.reduce((sum, count) => sum + count, 0)).toBe(600);
    expect(appends.length).toBeLessThan(600);
    expect((await store.journal(key))?.last_hermes_seq).toBe(600);
  });

  it('stops at its event limit, after writing every event it took', async () => {
    const { store, key, writer, stops } = await writerOn({ maxEvents: 5, maxBytes: 1 << 24 });
    for (let index = 0; index < 8; index++) writer.push(delta(index));
    await writer.flushed();
    expect(stops).toEqual(['max_events_per_run']);
    expect((await store.events(key, 0, 100)).map((entry) => entry.sequence)).toEqual([1, 2, 3, 4, 5]);
    expect(writer.nextSequence).toBe(6);
  });
});
