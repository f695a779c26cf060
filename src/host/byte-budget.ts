/**
 * A budget of bytes shared by the requests that hold large bodies: a body is read only once its size is
 * reserved, and its reservation is released when it has been answered. Waiting reservations are granted
 * smallest first, as far as the budget goes; a wait ends when its signal aborts (the body timeout, a client
 * that went away).
 */
export class ByteBudget {
  readonly capacity: number;
  #available: number;
  readonly #waiting: Array<{ bytes: number; grant: () => void }> = [];

  constructor(capacity: number) {
    this.capacity = capacity;
    this.#available = capacity;
  }

  /** Bytes not reserved now. */
  get available(): number {
    return this.#available;
  }

  /** Resolves with the release of `bytes` (at most the capacity) once they are reserved, or undefined when `signal` aborted first. */
  reserve(bytes: number, signal: AbortSignal): Promise<(() => void) | undefined> {
    const wanted = Math.min(bytes, this.capacity);
    if (signal.aborted) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const waiter = {
        bytes: wanted,
        grant: () => {
          signal.removeEventListener('abort', onAbort);
          resolve(this.#release(wanted));
        },
      };
      const onAbort = (): void => {
        const index = this.#waiting.indexOf(waiter);
        if (index !== -1) this.#waiting.splice(index, 1);
        resolve(undefined);
        this.#grant();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      const at = this.#waiting.findIndex((other) => other.bytes > wanted);
      this.#waiting.splice(at === -1 ? this.#waiting.length : at, 0, waiter);
      this.#grant();
    });
  }

  #release(bytes: number): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#available += bytes;
      this.#grant();
    };
  }

  #grant(): void {
    for (let next = this.#waiting[0]; next !== undefined && next.bytes <= this.#available; next = this.#waiting[0]) {
      this.#waiting.shift();
      this.#available -= next.bytes;
      next.grant();
    }
  }
}
