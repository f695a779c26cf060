import { EventEmitter } from 'node:events';
import { SlotList } from '../internal/slot-list.js';

export type AbortCause = 'cancelled' | 'closed' | 'deadline' | 'timeout';

/**
 * The abort signal handed to undici.request(), which takes an AbortSignal or an EventEmitter
 * that emits 'abort' and has `aborted`/`reason`. On Node 20 every new AbortController costs
 * several microseconds to create and its first listener as much again (see bench/), which is a
 * large share of a loopback request; an emitter costs a fraction of that.
 */
export class ScopeSignal extends EventEmitter {
  aborted = false;
  reason: unknown = undefined;
}

/**
 * The provider calls in flight, so that closing the connector aborts every one of them. A list
 * rather than a listener per call on an AbortSignal (adding and removing an EventTarget listener
 * costs microseconds and grows with the calls in flight), and rather than a Set: a Set that
 * keeps taking and dropping calls rehashes its table every few calls (about 100 bytes of
 * garbage per call). Each scope knows its place in the list; removal moves the last one there.
 */
export class OpenCalls {
  readonly #scopes = new SlotList<CallScope>();
  #closed = false;

  get closed(): boolean {
    return this.#closed;
  }

  /** Aborts every open call with cause `closed`; calls opened later start aborted. */
  close(): void {
    this.#closed = true;
    for (const scope of [...this.#scopes.items]) scope.closeCall();
  }

  get size(): number {
    return this.#scopes.items.length;
  }

  add(scope: CallScope): void {
    this.#scopes.add(scope);
  }

  delete(scope: CallScope): void {
    this.#scopes.remove(scope);
  }
}

/** What a scope aborts: a dispatched request's handler. */
export interface AbortTarget {
  abort(reason: Error): void;
}

export interface CallScopeOptions {
  signal: AbortSignal | undefined;
  openCalls: OpenCalls;
  /** Epoch ms after which the AIP action is out of time. */
  deadline: number | undefined;
  /** The operation's own provider timeout. */
  timeoutMs: number | undefined;
  now: () => number;
}

/**
 * One provider call's abort: it fires on the caller's signal, the connector's close, the AIP
 * deadline or the operation timeout, and remembers which. Disposing removes the listener, the
 * timer and the registration, so a long-lived caller signal never accumulates listeners.
 */
export class CallScope {
  #cause: AbortCause | undefined;
  #reason: Error | undefined;
  #signal: ScopeSignal | undefined;
  #onAbort: AbortTarget | undefined;
  readonly #parent: AbortSignal | undefined;
  readonly #openCalls: OpenCalls;
  /** Made only when there is a caller signal to listen to (most calls have none). */
  #onParentAbort: (() => void) | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** Its place in its OpenCalls' list while it is open, else -1 (the list's bookkeeping). */
  slot = -1;

  constructor({ signal, openCalls, deadline, timeoutMs, now }: CallScopeOptions) {
    this.#parent = signal;
    this.#openCalls = openCalls;
    if (signal?.aborted || openCalls.closed) {
      this.#abort(signal?.aborted ? 'cancelled' : 'closed');
      return;
    }
    if (signal) {
      this.#onParentAbort = () => this.#abort('cancelled');
      signal.addEventListener('abort', this.#onParentAbort, { once: true });
    }
    openCalls.add(this);
    const untilDeadline = deadline === undefined ? Infinity : deadline - now();
    const untilTimeout = timeoutMs ?? Infinity;
    const wait = Math.min(untilDeadline, untilTimeout);
    if (wait === Infinity) return;
    const cause: AbortCause = untilDeadline <= untilTimeout ? 'deadline' : 'timeout';
    if (wait <= 0) this.#abort(cause);
    else this.#timer = setTimeout(() => this.#abort(cause), Math.min(wait, 2 ** 31 - 1));
  }

  /** Why the scope was aborted, if it was. */
  get cause(): AbortCause | undefined {
    return this.#cause;
  }

  get aborted(): boolean {
    return this.#cause !== undefined;
  }

  /** The abort's reason (an Error naming the cause), once aborted. */
  get reason(): Error | undefined {
    return this.#reason;
  }

  /** An abort signal for undici.request(), made on first use: the streaming path needs one, the buffered path does not. */
  get signal(): ScopeSignal {
    if (!this.#signal) {
      this.#signal = new ScopeSignal();
      this.#signal.aborted = this.aborted;
      this.#signal.reason = this.#reason;
    }
    return this.#signal;
  }

  /** Sets the one target whose abort() stops a dispatched request (no closure per call); called at once if the scope already aborted. */
  onAbort(target: AbortTarget): void {
    this.#onAbort = target;
    if (this.#reason) target.abort(this.#reason);
  }

  /**
   * `work`'s outcome, or a rejection with the abort's reason if the scope aborts first: nothing the
   * scope bounds waits on a promise that may never settle. A value that still comes after the
   * abort goes to `release`; a late rejection is handled.
   */
  race<T>(work: Promise<T>, release: (value: T) => void = ignore): Promise<T> {
    if (this.#reason) {
      work.then(release, ignore);
      return Promise.reject(this.#reason);
    }
    const signal = this.signal;
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        work.then(release, ignore);
        reject(this.#reason);
      };
      signal.once('abort', onAbort);
      work.then(
        (value) => {
          signal.off('abort', onAbort);
          resolve(value);
        },
        (error: unknown) => {
          signal.off('abort', onAbort);
          reject(error);
        },
      );
    });
  }

  /** For OpenCalls.close(). */
  closeCall(): void {
    this.#abort('closed');
  }

  dispose(): void {
    clearTimeout(this.#timer);
    if (this.#onParentAbort) this.#parent?.removeEventListener('abort', this.#onParentAbort);
    this.#openCalls.delete(this);
  }

  #abort(cause: AbortCause): void {
    if (this.#cause !== undefined) return;
    this.#cause = cause;
    this.#reason = new Error(`aborted: ${cause}`);
    this.dispose();
    this.#onAbort?.abort(this.#reason as Error);
    if (this.#signal) {
      this.#signal.aborted = true;
      this.#signal.reason = this.#reason;
      this.#signal.emit('abort');
    }
  }
}

function ignore(): void {}
