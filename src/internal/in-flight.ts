/**
 * Work still running, so that closing can wait for it. Counts rather than a list of the promises:
 * one reaction per piece of work and no entry or closure (this runs on every invocation). drained()
 * waits for the work that had started when it was called; later work counts towards the next call,
 * so a caller that keeps starting work cannot hold it open.
 */
export class InFlight {
  #generation = new Generation();

  track<T>(work: Promise<T>): Promise<T> {
    const generation = this.#generation;
    generation.count++;
    // then(settled, settled), not finally(): a second promise that rejects again would be unhandled.
    work.then(generation.settled, generation.settled);
    return work;
  }

  /** Resolves once the work running now has settled. */
  drained(): Promise<void> {
    const generation = this.#generation;
    this.#generation = new Generation();
    return generation.count === 0 ? Promise.resolve() : new Promise((resolve) => generation.waiting.push(resolve));
  }
}

/** The work tracked between two drained() calls. */
class Generation {
  count = 0;
  readonly waiting: Array<() => void> = [];
  readonly settled = (): void => {
    if (--this.count > 0) return;
    for (const resolve of this.waiting.splice(0)) resolve();
  };
}
