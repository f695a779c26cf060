import { describe, expect, it } from 'vitest';
import { InFlight } from '../../src/internal/in-flight.js';
import { deferred } from '../helpers/deferred.js';

/** Whether `promise` has settled once every reaction queued so far has run. */
async function settledNow(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  void promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return settled;
}

describe('InFlight', () => {
  it('is drained at once when nothing runs', async () => {
    expect(await settledNow(new InFlight().drained())).toBe(true);
  });

  it('is drained only when every tracked piece of work has settled, rejected ones included', async () => {
    const inFlight = new InFlight();
    const first = deferred();
    const second = deferred();
    expect(inFlight.track(first.promise)).toBe(first.promise);
    inFlight.track(second.promise).catch(() => {});
    const drained = inFlight.drained();
    first.resolve();
    expect(await settledNow(drained)).toBe(false);
    second.reject(new Error('failed'));
    expect(await settledNow(drained)).toBe(true);
  });

  it('does not wait for work that started after drained() was called: a caller that keeps starting work cannot hold it open', async () => {
    const inFlight = new InFlight();
    const first = deferred();
    inFlight.track(first.promise);
    const drained = inFlight.drained();
    const late = deferred();
    inFlight.track(late.promise);
    first.resolve();
    expect(await settledNow(drained)).toBe(true);
    const next = inFlight.drained();
    expect(await settledNow(next)).toBe(false);
    late.resolve();
    expect(await settledNow(next)).toBe(true);
  });
});
