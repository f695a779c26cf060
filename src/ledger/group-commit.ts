/** One SQL statement with `?` placeholders. */
export interface SqlStatement {
  sql: string;
  params: unknown[];
}

/** Statements that are applied together or not at all. */
export type SqlUnit = readonly SqlStatement[];

/** Per unit of a batch: the rows each of its statements changed, or the error that undid the unit. */
export type UnitOutcome = number[] | Error;

/**
 * Commits a batch of units, each atomic on its own, in as few transactions as the backend can:
 * one unit's failure is that unit's alone; a rejection fails the whole batch.
 */
export type CommitBatch = (units: readonly SqlUnit[]) => Promise<UnitOutcome[]>;

export interface GroupCommitOptions {
  /** Batches being committed at once; while they are, new writes queue up for the next batch. */
  maxInFlight: number;
  /** Units per batch at most. */
  maxBatch: number;
}

export const asError = (error: unknown): Error => (error instanceof Error ? error : new Error(String(error)));

interface Pending {
  unit: SqlUnit;
  resolve: (changes: number[]) => void;
  reject: (error: Error) => void;
}

/**
 * Group commit: the writes that concurrent calls make within one turn of the event loop (and
 * while a batch is being committed) share one transaction, so 64 starts in flight pay for a
 * few commits instead of 64. Each write resolves only once its batch is committed, so a
 * caller still never acts on a write that could be lost.
 */
export class GroupCommit {
  readonly #commit: CommitBatch;
  readonly #options: GroupCommitOptions;
  #queue: Pending[] = [];
  #inFlight = 0;
  #scheduled = false;
  #idle: Array<() => void> = [];

  constructor(commit: CommitBatch, options: GroupCommitOptions) {
    this.#commit = commit;
    this.#options = options;
  }

  /** Resolves with the rows each statement of the unit changed, once the unit is committed. */
  write(unit: SqlUnit): Promise<number[]> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ unit, resolve, reject });
      this.#schedule();
    });
  }

  /** Resolves once every write queued so far is committed or failed. */
  drained(): Promise<void> {
    if (this.#queue.length === 0 && this.#inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #schedule(): void {
    if (this.#scheduled || this.#queue.length === 0 || this.#inFlight >= this.#options.maxInFlight) return;
    this.#scheduled = true;
    // The check phase comes right after the poll phase: every write made by the I/O callbacks of
    // this loop turn is in the batch, and a lone sequential write waits for nothing.
    setImmediate(() => {
      this.#scheduled = false;
      void this.#flush();
    });
  }

  async #flush(): Promise<void> {
    const batch = this.#queue.splice(0, this.#options.maxBatch);
    this.#inFlight++;
    this.#schedule();
    let outcomes: UnitOutcome[];
    try {
      outcomes = await this.#commit(batch.map((pending) => pending.unit));
    } catch (error) {
      outcomes = batch.map(() => asError(error));
    }
    this.#inFlight--;
    batch.forEach((pending, index) => {
      const outcome = outcomes[index] ?? new Error('the batch commit gave no outcome for this write');
      if (outcome instanceof Error) pending.reject(outcome);
      else pending.resolve(outcome);
    });
    this.#schedule();
    if (this.#queue.length === 0 && this.#inFlight === 0) for (const resolve of this.#idle.splice(0)) resolve();
  }
}
