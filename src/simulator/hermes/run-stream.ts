import type { TimerRegistry } from '../shared/timers.js';

/** What travels through a run's queue to its SSE subscriber. */
export type StreamItem = { kind: 'bytes'; data: string | Uint8Array } | { kind: 'cut' } | { kind: 'end' };

export type TakeResult = StreamItem | { kind: 'timeout' } | { kind: 'aborted' };

type Waiter = (item: StreamItem) => void;

/**
 * The single queue of one run (Hermes' per-run `asyncio.Queue`). All subscribers
 * share it and compete for items; items put before anyone subscribes stay
 * buffered until taken (the backlog).
 */
export class RunStream {
  readonly createdAt = Date.now();
  private readonly items: StreamItem[] = [];
  private readonly waiters: Waiter[] = [];
  private subscriberCount = 0;

  constructor(private readonly timers: TimerRegistry) {}

  put(item: StreamItem): void {
    const waiter = this.waiters.shift();
    if (waiter) waiter(item);
    else this.items.push(item);
  }

  get hasSubscribers(): boolean {
    return this.subscriberCount > 0;
  }

  attach(): void {
    this.subscriberCount++;
  }

  detach(): void {
    this.subscriberCount = Math.max(0, this.subscriberCount - 1);
  }

  /** Waits up to `timeoutMs` for the next item, FIFO among competing subscribers. */
  async take(timeoutMs: number, signal: AbortSignal): Promise<TakeResult> {
    const buffered = this.items.shift();
    if (buffered) return buffered;
    if (signal.aborted) return { kind: 'aborted' };

    let waiter: Waiter | undefined;
    const arrival = new Promise<StreamItem>((resolve) => {
      waiter = resolve;
      this.waiters.push(resolve);
    });
    const timerDone = new AbortController();
    const timeout = this.timers.delay(timeoutMs, AbortSignal.any([signal, timerDone.signal]));
    const result = await Promise.race([arrival, timeout.then((elapsed): TakeResult => (elapsed ? { kind: 'timeout' } : { kind: 'aborted' }))]);
    timerDone.abort();
    if (result.kind !== 'timeout' && result.kind !== 'aborted') return result;
    // An item handed to our waiter in the same turn as the timeout must not be lost.
    return this.dropWaiter(waiter) ? result : arrival;
  }

  /** Removes a waiter still waiting; false when it was already given an item. */
  private dropWaiter(waiter: Waiter | undefined): boolean {
    const index = waiter ? this.waiters.indexOf(waiter) : -1;
    if (index < 0) return false;
    this.waiters.splice(index, 1);
    return true;
  }
}
