/** The byte budget large bodies are read within: granted smallest first as far as it goes, released once, a wait ended by its signal. */
import { describe, expect, it } from 'vitest';
import { ByteBudget } from '../../src/host/byte-budget.js';

const never = new AbortController().signal;

describe('ByteBudget', () => {
  it('grants at once what fits, makes the rest wait, and grants waiters smallest first as releases allow', async () => {
    const budget = new ByteBudget(100);
    const first = await budget.reserve(70, never);
    expect(budget.available).toBe(30);
    const granted: number[] = [];
    const waits = [50, 40, 20].map((bytes) =>
      budget.reserve(bytes, never).then((release) => {
        granted.push(bytes);
        return release;
      }),
    );
    // 20 fits beside the 70, though it asked last; 40 and 50 wait.
    await new Promise((resolve) => setImmediate(resolve));
    expect(granted).toEqual([20]);
    first?.();
    first?.();
    await new Promise((resolve) => setImmediate(resolve));
    // 80 free: 40 then 50 would need 90, so only 40; a second release of the same share changed nothing.
    expect(granted).toEqual([20, 40]);
    expect(budget.available).toBe(40);
    const releases = await Promise.all([waits[1], waits[2]]);
    for (const release of releases) release?.();
    await new Promise((resolve) => setImmediate(resolve));
    expect(granted).toEqual([20, 40, 50]);
    (await waits[0])?.();
    expect(budget.available).toBe(100);
  });

  it('ends a wait when its signal aborts, and asks for at most the whole budget', async () => {
    const budget = new ByteBudget(100);
    const all = await budget.reserve(1_000, never);
    expect(budget.available).toBe(0);
    const gone = new AbortController();
    const waiting = budget.reserve(10, gone.signal);
    gone.abort();
    expect(await waiting).toBeUndefined();
    expect(await budget.reserve(10, gone.signal)).toBeUndefined();
    all?.();
    expect(budget.available).toBe(100);
  });
});
