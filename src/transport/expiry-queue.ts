/** What an ExpiryQueue holds: something with a time to expire at, which knows its place in the queue. */
export interface Expiring {
  /** When it expires, on the `performance.now()` clock. */
  readonly expiresAt: number;
  /** Its index in the queue's heap; -1 while in none (the queue's bookkeeping). */
  queueIndex: number;
  expire(): void;
}

/** setTimeout's longest delay; a later expiry is reached in steps. */
const MAX_DELAY_MS = 2 ** 31 - 1;

/**
 * One timer for many expiries: a binary min-heap by expiry time and a single Node timer armed for
 * the earliest. Provider calls come and go by the thousand, nearly all long before their deadline;
 * a timer each cost every call a Timeout object, an async resource and two timer-list operations
 * (bench/pipeline-cost.ts), where this costs two heap operations. The timer is re-armed only when
 * it fires or an earlier expiry arrives, and holds the process open only while something waits.
 */
export class ExpiryQueue<T extends Expiring> {
  readonly #heap: T[] = [];
  #timer: NodeJS.Timeout | undefined;
  /** The expiry the timer is armed for; Infinity when none is. */
  #armedFor = Infinity;

  get size(): number {
    return this.#heap.length;
  }

  add(item: T): void {
    item.queueIndex = this.#heap.length;
    this.#heap.push(item);
    this.#siftUp(item.queueIndex);
    if (item.expiresAt < this.#armedFor) this.#arm(item.expiresAt);
    else this.#timer?.ref();
  }

  /** Takes the item out before it expires; nothing happens for an item not in the queue. */
  remove(item: T): void {
    const at = item.queueIndex;
    if (at === -1 || this.#heap[at] !== item) return;
    item.queueIndex = -1;
    const last = this.#heap.pop() as T;
    if (last !== item) {
      this.#heap[at] = last;
      last.queueIndex = at;
      this.#siftDown(at);
      this.#siftUp(last.queueIndex);
    }
    // The timer stays armed for an expiry that may be gone: it re-arms when it fires.
    if (this.#heap.length === 0) this.#timer?.unref();
  }

  readonly #fire = (): void => {
    const reached = this.#armedFor;
    this.#armedFor = Infinity;
    this.#timer = undefined;
    // Everything due by the time the timer was armed for has expired, by the timer's own clock.
    for (let first = this.#heap[0]; first !== undefined && first.expiresAt <= reached; first = this.#heap[0]) {
      this.remove(first);
      first.expire();
    }
    const next = this.#heap[0];
    if (next) this.#arm(next.expiresAt);
  };

  #arm(expiresAt: number): void {
    clearTimeout(this.#timer);
    const delay = Math.min(Math.max(expiresAt - performance.now(), 1), MAX_DELAY_MS);
    this.#armedFor = delay === MAX_DELAY_MS ? performance.now() + delay : expiresAt;
    this.#timer = setTimeout(this.#fire, delay);
  }

  #siftUp(index: number): void {
    const heap = this.#heap;
    const item = heap[index] as T;
    while (index > 0) {
      const parentIndex = (index - 1) >> 1;
      const parent = heap[parentIndex] as T;
      if (parent.expiresAt <= item.expiresAt) break;
      heap[index] = parent;
      parent.queueIndex = index;
      index = parentIndex;
    }
    heap[index] = item;
    item.queueIndex = index;
  }

  #siftDown(index: number): void {
    const heap = this.#heap;
    const item = heap[index] as T;
    for (;;) {
      const left = 2 * index + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const child = right < heap.length && (heap[right] as T).expiresAt < (heap[left] as T).expiresAt ? right : left;
      const smaller = heap[child] as T;
      if (smaller.expiresAt >= item.expiresAt) break;
      heap[index] = smaller;
      smaller.queueIndex = index;
      index = child;
    }
    heap[index] = item;
    item.queueIndex = index;
  }
}
