import type { TimerRegistry } from '../shared/timers.js';

/** What travels through a run's queue to its SSE subscriber. */
export type StreamItem = { kind: 'bytes'; data: string | Uint8Array } | { kind: 'cut' } | { kind: 'end' };

/** What a backlog stream retains: an event's frame, or the end of the stream, each with its `seq`. */
interface Retained {
  seq: number;
  item: StreamItem;
}

/** A subscription to a backlog stream: its own queue, already holding what it replays. */
export interface Subscription {
  readonly queue: RunStream;
  /** The oldest `seq` still retained, when the replay asked for older events (`replay.truncated`). */
  readonly truncatedAt?: number;
  close(): void;
}

export type TakeResult = StreamItem | { kind: 'timeout' } | { kind: 'aborted' };

type Waiter = (item: StreamItem) => void;

/**
 * The single queue of one run (Hermes' per-run `asyncio.Queue`). All subscribers
 * share it and compete for items; items put before anyone subscribes stay
 * buffered until taken. In backlog mode (0.22's `_RunStream`) it numbers and
 * retains events instead, and every subscriber reads its own copy.
 */
export class RunStream {
  readonly createdAt = Date.now();
  private readonly items: StreamItem[] = [];
  private readonly waiters: Waiter[] = [];
  private subscriberCount = 0;
  /** Backlog mode (0.22): the retained items, the next `seq`, and every subscriber's own queue. */
  private readonly backlog: Retained[] | undefined;
  private nextSeq = 0;
  private ended = false;
  private readonly subscribers = new Set<RunStream>();

  /**
   * A plain queue that subscribers compete for; with `retainEvents`, a backlog stream (0.22) that
   * numbers what it is given, keeps the last `retainEvents` items and hands each subscriber its own copy.
   */
  constructor(
    private readonly timers: TimerRegistry,
    private readonly retainEvents?: number,
  ) {
    this.backlog = retainEvents === undefined ? undefined : [];
  }

  /** Backlog mode: the `seq` the next event gets, or undefined when the stream has ended (Hermes then drops the event). */
  get seqForNextEvent(): number | undefined {
    return this.backlog === undefined || this.ended ? undefined : this.nextSeq;
  }

  /**
   * A plain queue hands the item to one subscriber (or buffers it). A backlog stream retains an
   * event frame (`seq` given) or the end, numbering the end too, and copies the item to every
   * subscriber; raw bytes and cuts go to the current subscribers only. Nothing is taken after the end.
   */
  put(item: StreamItem, seq?: number): void {
    if (this.backlog === undefined) {
      const waiter = this.waiters.shift();
      if (waiter) waiter(item);
      else this.items.push(item);
      return;
    }
    if (this.ended) return;
    if (seq !== undefined || item.kind === 'end') {
      this.backlog.push({ seq: seq ?? this.nextSeq, item });
      this.nextSeq = (seq ?? this.nextSeq) + 1;
      if (this.backlog.length > (this.retainEvents as number)) this.backlog.shift();
      if (item.kind === 'end') this.ended = true;
    }
    for (const subscriber of this.subscribers) subscriber.put(item);
  }

  /**
   * Backlog mode: a subscriber's queue, holding the retained items after `lastSeq` (all of them for
   * -1), and the live ones after them; ends at once when the stream has ended and nothing is left.
   */
  subscribe(lastSeq: number): Subscription {
    const queue = new RunStream(this.timers);
    const replay = (this.backlog ?? []).filter((retained) => retained.seq > lastSeq);
    const oldest = replay[0]?.seq;
    for (const retained of replay) queue.put(retained.item);
    if (this.ended && !replay.some((retained) => retained.item.kind === 'end')) queue.put({ kind: 'end' });
    if (!this.ended) this.subscribers.add(queue);
    return {
      queue,
      ...(oldest !== undefined && oldest > lastSeq + 1 ? { truncatedAt: oldest } : {}),
      close: () => {
        this.subscribers.delete(queue);
      },
    };
  }

  get hasSubscribers(): boolean {
    return this.subscriberCount > 0 || this.subscribers.size > 0;
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
