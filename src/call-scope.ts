import { EventEmitter } from 'node:events';

export type AbortCause = 'cancelled' | 'closed' | 'deadline' | 'timeout';

/**
 * The abort signal handed to undici, which takes an AbortSignal or an EventEmitter that emits
 * 'abort' and has `aborted`/`reason`. On Node 20 every new AbortController costs several
 * microseconds to create and its first listener as much again (see bench/), which is a large
 * share of a loopback request; an emitter costs a fraction of that.
 */
export class ScopeSignal extends EventEmitter {
  aborted = false;
  reason: unknown = undefined;
}

export interface CallScopeOptions {
  signal: AbortSignal | undefined;
  /** Aborted when the connector closes. */
  closeSignal: AbortSignal;
  /** Epoch ms after which the AIP action is out of time. */
  deadline: number | undefined;
  /** The operation's own provider timeout. */
  timeoutMs: number | undefined;
  now: () => number;
}

/**
 * One abort signal per provider call that fires on the caller's signal, the connector's
 * close, the AIP deadline or the operation timeout, and remembers which. Disposing removes the listener and the timer,
 * so a long-lived caller signal never accumulates listeners.
 */
export class CallScope {
  readonly signal = new ScopeSignal();
  #cause: AbortCause | undefined;
  readonly #parent: AbortSignal | undefined;
  readonly #closeSignal: AbortSignal;
  readonly #onParentAbort = () => this.#abort('cancelled');
  readonly #onClose = () => this.#abort('closed');
  #timer: NodeJS.Timeout | undefined;

  constructor({ signal, closeSignal, deadline, timeoutMs, now }: CallScopeOptions) {
    this.#parent = signal;
    this.#closeSignal = closeSignal;
    if (signal?.aborted || closeSignal.aborted) {
      this.#abort(signal?.aborted ? 'cancelled' : 'closed');
      return;
    }
    signal?.addEventListener('abort', this.#onParentAbort, { once: true });
    closeSignal.addEventListener('abort', this.#onClose, { once: true });
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

  dispose(): void {
    clearTimeout(this.#timer);
    this.#parent?.removeEventListener('abort', this.#onParentAbort);
    this.#closeSignal.removeEventListener('abort', this.#onClose);
  }

  #abort(cause: AbortCause): void {
    if (this.#cause !== undefined) return;
    this.#cause = cause;
    this.dispose();
    this.signal.aborted = true;
    this.signal.reason = new Error(`aborted: ${cause}`);
    this.signal.emit('abort');
  }
}
