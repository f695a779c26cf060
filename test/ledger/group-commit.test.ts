/**
 * GroupCommit on its own, over a scripted commit function: which writes share a batch, how
 * many batches run at once, and whose failure is whose.
 */
import { describe, expect, it } from 'vitest';
import { GroupCommit, type SqlUnit, type UnitOutcome } from '../../src/ledger/group-commit.js';

const unit = (tag: string): SqlUnit => [{ sql: tag, params: [] }];

/** A commit function that records each batch's tags and answers when told to. */
function scriptedCommit() {
  const batches: string[][] = [];
  const pending: Array<{ units: readonly SqlUnit[]; answer: (outcomes: UnitOutcome[] | Error) => void }> = [];
  const commit = (units: readonly SqlUnit[]) => {
    batches.push(units.map((u) => u[0]?.sql as string));
    return new Promise<UnitOutcome[]>((resolve, reject) => {
      pending.push({ units, answer: (outcomes) => (outcomes instanceof Error ? reject(outcomes) : resolve(outcomes)) });
    });
  };
  const answerNext = (outcomes?: (units: readonly SqlUnit[]) => UnitOutcome[] | Error) => {
    const next = pending.shift();
    if (!next) throw new Error('no batch is waiting');
    next.answer(outcomes ? outcomes(next.units) : next.units.map((u) => u.map(() => 1)));
  };
  return { batches, pending, commit, answerNext };
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('GroupCommit', () => {
  it('the writes of one event-loop turn share one batch, in order', async () => {
    const script = scriptedCommit();
    const group = new GroupCommit(script.commit, { maxInFlight: 1, maxBatch: 100 });
    const writes = ['a', 'b', 'c'].map((tag) => group.write(unit(tag)));
    await turn();
    expect(script.batches).toEqual([['a', 'b', 'c']]);
    script.answerNext();
    await expect(Promise.all(writes)).resolves.toEqual([[1], [1], [1]]);
  });

  it('a write resolves only once its batch is committed', async () => {
    const script = scriptedCommit();
    const group = new GroupCommit(script.commit, { maxInFlight: 1, maxBatch: 100 });
    let settled = false;
    const write = group.write(unit('a')).then(() => {
      settled = true;
    });
    await turn();
    await turn();
    expect(settled).toBe(false);
    script.answerNext();
    await write;
    expect(settled).toBe(true);
  });

  it('while maxInFlight batches are committing, new writes gather into the next batch', async () => {
    const script = scriptedCommit();
    const group = new GroupCommit(script.commit, { maxInFlight: 1, maxBatch: 100 });
    const first = group.write(unit('a'));
    await turn();
    const later = [group.write(unit('b')), group.write(unit('c'))];
    await turn();
    const last = group.write(unit('d'));
    await turn();
    expect(script.batches).toEqual([['a']]);
    script.answerNext();
    await first;
    await turn();
    expect(script.batches).toEqual([['a'], ['b', 'c', 'd']]);
    script.answerNext();
    await Promise.all([...later, last]);
  });

  it('maxInFlight 2: two batches commit at once, the third waits for one of them', async () => {
    const script = scriptedCommit();
    const group = new GroupCommit(script.commit, { maxInFlight: 2, maxBatch: 100 });
    group.write(unit('a'));
    await turn();
    group.write(unit('b'));
    await turn();
    const third = group.write(unit('c'));
    await turn();
    expect(script.batches).toEqual([['a'], ['b']]);
    script.answerNext();
    await turn();
    await turn();
    expect(script.batches).toEqual([['a'], ['b'], ['c']]);
    script.answerNext();
    script.answerNext();
    await expect(third).resolves.toEqual([1]);
  });

  it('a batch holds at most maxBatch units; the rest follow in further batches', async () => {
    const script = scriptedCommit();
    const group = new GroupCommit(script.commit, { maxInFlight: 4, maxBatch: 2 });
    const writes = ['a', 'b', 'c', 'd', 'e'].map((tag) => group.write(unit(tag)));
    for (let i = 0; i < 5; i++) await turn();
    expect(script.batches).toEqual([['a', 'b'], ['c', 'd'], ['e']]);
    while (script.pending.length > 0) script.answerNext();
    await expect(Promise.all(writes)).resolves.toHaveLength(5);
  });

  it("one unit's error rejects that write only", async () => {
    const script = scriptedCommit();
    const group = new GroupCommit(script.commit, { maxInFlight: 1, maxBatch: 100 });
    const writes = ['a', 'bad', 'c'].map((tag) => group.write(unit(tag)));
    await turn();
    script.answerNext((units) => units.map((u) => (u[0]?.sql === 'bad' ? new Error('constraint') : [1])));
    const outcomes = await Promise.allSettled(writes);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason.message).toBe('constraint');
  });

  it('a failed batch rejects each of its writes; the next batch still commits', async () => {
    const script = scriptedCommit();
    const group = new GroupCommit(script.commit, { maxInFlight: 1, maxBatch: 100 });
    const doomed = [group.write(unit('a')), group.write(unit('b'))];
    await turn();
    const next = group.write(unit('c'));
    script.answerNext(() => new Error('connection lost'));
    const outcomes = await Promise.allSettled(doomed);
    expect(outcomes.map((outcome) => outcome.status === 'rejected' && outcome.reason.message)).toEqual(['connection lost', 'connection lost']);
    await turn();
    script.answerNext();
    await expect(next).resolves.toEqual([1]);
  });

  it('a commit function that throws synchronously fails its batch, not the process', async () => {
    const group = new GroupCommit(
      () => {
        throw new TypeError('cannot render');
      },
      { maxInFlight: 1, maxBatch: 100 },
    );
    await expect(group.write(unit('a'))).rejects.toThrow('cannot render');
  });

  it('a missing outcome for a unit is an error for that write, not a hang', async () => {
    const group = new GroupCommit(async () => [[1]], { maxInFlight: 1, maxBatch: 100 });
    const [first, second] = [group.write(unit('a')), group.write(unit('b'))];
    await expect(first).resolves.toEqual([1]);
    await expect(second).rejects.toThrow('no outcome');
  });

  it('drained() waits for queued and committing writes, and is immediate when idle', async () => {
    const script = scriptedCommit();
    const group = new GroupCommit(script.commit, { maxInFlight: 1, maxBatch: 100 });
    await group.drained();
    group.write(unit('a'));
    let drained = false;
    const waiting = group.drained().then(() => {
      drained = true;
    });
    await turn();
    expect(drained).toBe(false);
    script.answerNext();
    await waiting;
    expect(drained).toBe(true);
  });
});
