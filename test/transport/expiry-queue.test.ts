import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Expiring, ExpiryQueue } from '../../src/transport/expiry-queue.js';

class Item implements Expiring {
  queueIndex = -1;
  expiredAt: number | undefined;
  constructor(
    readonly name: string,
    readonly expiresAt: number,
    private readonly log: string[],
  ) {}
  expire(): void {
    this.expiredAt = performance.now();
    this.log.push(this.name);
  }
}

const timers = () => process.getActiveResourcesInfo().filter((resource) => resource === 'Timeout').length;

describe('ExpiryQueue', () => {
  it('expires each item once, in the order of its expiry, not before it', async () => {
    const log: string[] = [];
    const queue = new ExpiryQueue<Item>();
    const start = performance.now();
    const items = [new Item('c', start + 60, log), new Item('a', start + 20, log), new Item('b', start + 40, log)];
    for (const item of items) queue.add(item);
    await sleep(120);
    expect(log).toEqual(['a', 'b', 'c']);
    // Node fires a timer by its loop clock, which may lag performance.now() by a millisecond or two.
    for (const item of items) expect(item.expiredAt).toBeGreaterThanOrEqual(item.expiresAt - 5);
    expect(queue.size).toBe(0);
  });

  it('never expires what was removed, wherever it stood in the heap', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ delay: fc.integer({ min: 1, max: 30 }), removed: fc.boolean() }), { minLength: 1, maxLength: 40 }),
        async (plan) => {
          const log: string[] = [];
          const queue = new ExpiryQueue<Item>();
          const start = performance.now();
          const items = plan.map(({ delay }, index) => new Item(String(index), start + delay, log));
          for (const item of items) queue.add(item);
          plan.forEach(({ removed }, index) => removed && queue.remove(items[index] as Item));
          await sleep(50);
          const kept = items.filter((_, index) => !plan[index]?.removed);
          expect([...log].sort()).toEqual(kept.map((item) => item.name).sort());
          const order = log.map((name) => items[Number(name)]?.expiresAt ?? Number.NaN);
          expect(order).toEqual([...order].sort((a, b) => a - b));
          expect(queue.size).toBe(0);
        },
      ),
      { numRuns: 15 },
    );
  });

  it('re-arms for a later expiry when the earliest is removed', async () => {
    const log: string[] = [];
    const queue = new ExpiryQueue<Item>();
    const start = performance.now();
    const early = new Item('early', start + 10, log);
    queue.add(early);
    queue.add(new Item('late', start + 40, log));
    queue.remove(early);
    await sleep(25);
    expect(log).toEqual([]);
    await sleep(40);
    expect(log).toEqual(['late']);
  });

  it('holds the process open only while something waits', async () => {
    const before = timers();
    const queue = new ExpiryQueue<Item>();
    const item = new Item('x', performance.now() + 60_000, []);
    queue.add(item);
    expect(timers()).toBe(before + 1);
    queue.remove(item);
    expect(timers()).toBe(before);
    const again = new Item('y', performance.now() + 120_000, []);
    queue.add(again);
    expect(timers()).toBe(before + 1);
    queue.remove(again);
  });

  it('reaches an expiry past the longest timer delay in steps, not at once', async () => {
    const log: string[] = [];
    const queue = new ExpiryQueue<Item>();
    const far = new Item('far', performance.now() + 2 ** 33, log);
    queue.add(far);
    await sleep(30);
    expect(log).toEqual([]);
    queue.remove(far);
  });
});
