import { getEventListeners, once, setMaxListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { CallScope, OpenCalls, type CallScopeOptions } from '../../src/transport/call-scope.js';

const HOUR = 3_600_000;

function scope(overrides: Partial<CallScopeOptions> = {}): CallScope {
  return new CallScope({ signal: undefined, openCalls: new OpenCalls(), deadline: undefined, timeoutMs: undefined, now: Date.now, ...overrides });
}

function closedCalls(): OpenCalls {
  const calls = new OpenCalls();
  calls.close();
  return calls;
}

function abortedSignal(): AbortSignal {
  const controller = new AbortController();
  controller.abort();
  return controller.signal;
}

const listeners = (signal: AbortSignal) => getEventListeners(signal, 'abort').length;

describe('CallScope causes', () => {
  it('starts unaborted without a cause', () => {
    const s = scope({ signal: new AbortController().signal, deadline: Date.now() + HOUR, timeoutMs: HOUR });
    expect(s.signal.aborted).toBe(false);
    expect(s.cause).toBeUndefined();
    s.dispose();
  });

  it('a pre-aborted caller signal aborts at once with cause cancelled', () => {
    const s = scope({ signal: abortedSignal(), deadline: Date.now() - 1, timeoutMs: 0 });
    expect(s.signal.aborted).toBe(true);
    expect(s.cause).toBe('cancelled');
  });

  it('a scope opened after the connector closed aborts at once with cause closed', () => {
    const s = scope({ openCalls: closedCalls() });
    expect(s.signal.aborted).toBe(true);
    expect(s.cause).toBe('closed');
  });

  it('the caller signal wins over the close when both happened', () => {
    expect(scope({ signal: abortedSignal(), openCalls: closedCalls() }).cause).toBe('cancelled');
  });

  it('a caller abort later gives cause cancelled', () => {
    const controller = new AbortController();
    const s = scope({ signal: controller.signal, timeoutMs: HOUR });
    controller.abort();
    expect(s.signal.aborted).toBe(true);
    expect(s.cause).toBe('cancelled');
    expect(listeners(controller.signal)).toBe(0);
  });

  it('closing the connector later gives cause closed', () => {
    const calls = new OpenCalls();
    const caller = new AbortController();
    const s = scope({ signal: caller.signal, openCalls: calls, timeoutMs: HOUR });
    calls.close();
    expect(s.signal.aborted).toBe(true);
    expect(s.cause).toBe('closed');
    // The first cause sticks.
    caller.abort();
    expect(s.cause).toBe('closed');
    expect(listeners(caller.signal)).toBe(0);
  });

  it('a deadline in the past aborts immediately with cause deadline', () => {
    const now = 1_800_000_000_000;
    const s = scope({ deadline: now - 1, timeoutMs: HOUR, now: () => now });
    expect(s.signal.aborted).toBe(true);
    expect(s.cause).toBe('deadline');
  });

  it('a deadline equal to now aborts immediately with cause deadline', () => {
    const now = 1_800_000_000_000;
    const s = scope({ deadline: now, now: () => now });
    expect(s.signal.aborted).toBe(true);
    expect(s.cause).toBe('deadline');
  });

  it('a timeout shorter than the deadline fires with cause timeout', async () => {
    const s = scope({ deadline: Date.now() + HOUR, timeoutMs: 1 });
    expect(s.signal.aborted).toBe(false);
    await once(s.signal, 'abort');
    expect(s.cause).toBe('timeout');
  });

  it('a deadline sooner than the timeout fires with cause deadline', async () => {
    const s = scope({ deadline: Date.now() + 2, timeoutMs: HOUR });
    await once(s.signal, 'abort');
    expect(s.cause).toBe('deadline');
  });

  it('a timeout with no deadline fires with cause timeout', async () => {
    const s = scope({ timeoutMs: 1 });
    await once(s.signal, 'abort');
    expect(s.cause).toBe('timeout');
  });

  it('the abort reason names the cause', async () => {
    const s = scope({ timeoutMs: 1 });
    await once(s.signal, 'abort');
    expect(s.signal.reason).toBeInstanceOf(Error);
    expect((s.signal.reason as Error).message).toBe('aborted: timeout');
  });

  it('dispose cancels the timer: a disposed scope never aborts', async () => {
    const s = scope({ timeoutMs: 1 });
    s.dispose();
    const sentinel = scope({ timeoutMs: 5 });
    await once(sentinel.signal, 'abort');
    expect(s.signal.aborted).toBe(false);
    expect(s.cause).toBeUndefined();
  });

  it('dispose detaches the caller signal: a later abort leaves the scope alone', () => {
    const controller = new AbortController();
    const s = scope({ signal: controller.signal });
    s.dispose();
    controller.abort();
    expect(s.signal.aborted).toBe(false);
    expect(s.cause).toBeUndefined();
  });

  it('dispose is idempotent', () => {
    const s = scope({ signal: new AbortController().signal, timeoutMs: HOUR });
    s.dispose();
    expect(() => s.dispose()).not.toThrow();
  });
});

describe('listeners on long-lived signals', () => {
  it('each scope adds one listener to the caller signal and one open call, and dispose removes both', () => {
    const caller = new AbortController();
    const calls = new OpenCalls();
    const s = scope({ signal: caller.signal, openCalls: calls });
    expect(listeners(caller.signal)).toBe(1);
    expect(calls.size).toBe(1);
    s.dispose();
    expect(listeners(caller.signal)).toBe(0);
    expect(calls.size).toBe(0);
  });

  it('1000 scopes on one caller signal leave no listener and no open call after dispose', () => {
    const caller = new AbortController();
    const calls = new OpenCalls();
    // 1000 live scopes at once are intended here; silence Node's leak heuristic for this signal.
    setMaxListeners(2000, caller.signal);
    const scopes = Array.from({ length: 1000 }, () => scope({ signal: caller.signal, openCalls: calls, deadline: Date.now() + HOUR, timeoutMs: HOUR }));
    expect(listeners(caller.signal)).toBe(1000);
    expect(calls.size).toBe(1000);
    for (const s of scopes) s.dispose();
    expect(listeners(caller.signal)).toBe(0);
    expect(calls.size).toBe(0);
    expect(scopes.every((s) => !s.signal.aborted && s.cause === undefined)).toBe(true);
  });

  it('a scope that aborted on its own (deadline) detaches itself from the caller signal and the open calls', () => {
    const caller = new AbortController();
    const calls = new OpenCalls();
    const now = 1_800_000_000_000;
    for (let i = 0; i < 100; i += 1) scope({ signal: caller.signal, openCalls: calls, deadline: now - 1, now: () => now });
    expect(listeners(caller.signal)).toBe(0);
    expect(calls.size).toBe(0);
  });

  it('a scope that timed out detaches itself without dispose', async () => {
    const caller = new AbortController();
    const calls = new OpenCalls();
    const s = scope({ signal: caller.signal, openCalls: calls, timeoutMs: 1 });
    expect(listeners(caller.signal)).toBe(1);
    await once(s.signal, 'abort');
    expect(listeners(caller.signal)).toBe(0);
    expect(calls.size).toBe(0);
  });

  it('closing the open calls aborts every scope and detaches each from the caller signal', () => {
    const caller = new AbortController();
    setMaxListeners(200, caller.signal);
    const calls = new OpenCalls();
    const scopes = Array.from({ length: 100 }, () => scope({ signal: caller.signal, openCalls: calls }));
    calls.close();
    expect(scopes.every((s) => s.cause === 'closed' && s.aborted)).toBe(true);
    expect(listeners(caller.signal)).toBe(0);
    expect(calls.size).toBe(0);
  });
});

describe('the abort hook of the buffered path', () => {
  it('is called once with the reason when the scope aborts, and at once when set on an aborted scope', () => {
    const controller = new AbortController();
    const s = scope({ signal: controller.signal });
    const seen: unknown[] = [];
    s.onAbort({ abort: (reason) => seen.push(reason) });
    expect(seen).toEqual([]);
    controller.abort();
    controller.abort();
    expect(seen).toEqual([s.reason]);
    expect((seen[0] as Error).message).toBe('aborted: cancelled');
    const late: unknown[] = [];
    s.onAbort({ abort: (reason) => late.push(reason) });
    expect(late).toEqual([s.reason]);
  });

  it('a signal made after the abort starts aborted with the same reason', () => {
    const s = scope({ openCalls: closedCalls() });
    expect(s.signal.aborted).toBe(true);
    expect(s.signal.reason).toBe(s.reason);
  });
});

describe('CallScope.race', () => {
  it('settles as the work does while the scope is open, and leaves no listener behind', async () => {
    const s = scope({ deadline: Date.now() + HOUR });
    await expect(s.race(Promise.resolve(7))).resolves.toBe(7);
    await expect(s.race(Promise.reject(new Error('work failed')))).rejects.toThrow('work failed');
    expect(s.signal.listenerCount('abort')).toBe(0);
    s.dispose();
  });

  it('rejects with the abort reason when the scope aborts first; a value that still comes is released', async () => {
    const controller = new AbortController();
    const s = scope({ signal: controller.signal });
    let arrive!: (value: string) => void;
    const released: string[] = [];
    const raced = s.race(new Promise<string>((resolve) => (arrive = resolve)), (value) => void released.push(value));
    controller.abort();
    await expect(raced).rejects.toBe(s.reason);
    arrive('late');
    await new Promise((resolve) => setImmediate(resolve));
    expect(released).toEqual(['late']);
  });

  it('rejects at once in an aborted scope, and a late rejection of the work is handled', async () => {
    const s = scope({ openCalls: closedCalls() });
    let fail!: (error: Error) => void;
    const raced = s.race(new Promise<void>((_, reject) => (fail = reject)));
    await expect(raced).rejects.toBe(s.reason);
    fail(new Error('late'));
    await new Promise((resolve) => setImmediate(resolve));
  });
});
