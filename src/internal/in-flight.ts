/**
 * Work still running, so that closing can wait for it. A count rather than a list of the
 * promises: one reaction per piece of work, no entry or closure (this runs on every invocation).
 */
export class InFlight {
  #count = 0;
  #waiting: Array<() => void> = [];
  readonly #settled = (): void => {
    if (--this.#count > 0) return;
    for (const resolve of this.#waiting.splice(0)) resolve();
  };

  track<T>(work: Promise<T>): Promise<T> {
    this.#count++;
    // then(settled, settled), not finally(): a second promise that rejects again would be unhandled.
    work.then(this.#settled, this.#settled);
    return work;
  }

  /** Resolves once nothing is running, including work that started after this call. */
  drained(): Promise<void> {
    return this.#count === 0 ? Promise.resolve() : new Promise((resolve) => this.#waiting.push(resolve));
  }
}
