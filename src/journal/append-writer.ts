import type { HermesSseEvent } from '../contract/aip.js';
import type { JournalEntry, JournalKey, JournalStore } from './types.js';

/** Events buffered before the follower waits for the ledger (back-pressure on the stream it reads). */
const MAX_BUFFERED = 256;

/** Why the writer stopped taking events. */
export type WriterStop = 'max_events_per_run' | 'max_bytes_per_run' | 'max_total_bytes' | 'lease_lost' | 'ledger_failed';

export interface AppendWriterOptions {
  store: JournalStore;
  key: JournalKey;
  owner: string;
  /** The journal as held: its next sequence and stored bytes. */
  nextSequence: number;
  bytes: number;
  maxEvents: number;
  maxBytes: number;
  /** The `seq` of an event, when Hermes numbers its events. */
  seqOf(event: HermesSseEvent): number | undefined;
  /** Called once, when the writer stops taking events. */
  onStop(why: WriterStop): void;
}

/**
 * Appends one run's events in order, one write in flight at a time: what arrives while a write is
 * being committed goes into the next one, so a burst costs a few commits and a reader never sees a
 * later sequence before an earlier one. Past MAX_BUFFERED events the follower waits (push returns a promise).
 */
export class AppendWriter {
  readonly #options: AppendWriterOptions;
  #next: number;
  #bytes: number;
  #buffer: JournalEntry[] = [];
  #bufferBytes = 0;
  #bufferSeq: number | null = null;
  #committed: { next: number; bytes: number };
  #writing: Promise<void> | undefined;
  #stopped: WriterStop | undefined;
  #drainWaiters: Array<() => void> = [];

  constructor(options: AppendWriterOptions) {
    this.#options = options;
    this.#next = options.nextSequence;
    this.#bytes = options.bytes;
    this.#committed = { next: options.nextSequence, bytes: options.bytes };
  }

  get stopped(): WriterStop | undefined {
    return this.#stopped;
  }

  /** The sequence after the last event committed to the journal (events taken but not written do not count). */
  get nextSequence(): number {
    return this.#committed.next;
  }

  /** Bytes of the journal's committed events. */
  get bytes(): number {
    return this.#committed.bytes;
  }

  push(event: HermesSseEvent): Promise<void> | undefined {
    if (this.#stopped) return undefined;
    const size = Buffer.byteLength(JSON.stringify(event));
    if (this.#next - 1 >= this.#options.maxEvents) return this.#stop('max_events_per_run');
    if (this.#bytes + size > this.#options.maxBytes) return this.#stop('max_bytes_per_run');
    this.#buffer.push({ sequence: this.#next++, event });
    this.#bytes += size;
    this.#bufferBytes += size;
    this.#bufferSeq = this.#options.seqOf(event) ?? this.#bufferSeq;
    this.#writing ??= this.#writeAll();
    if (this.#buffer.length < MAX_BUFFERED) return undefined;
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  /** Resolves once every event taken so far is written (or the writer stopped). */
  async flushed(): Promise<void> {
    while (this.#writing) await this.#writing;
  }

  /** Stops taking events (a limit the follower found, such as the total size). */
  stop(why: WriterStop): void {
    this.#stop(why);
  }

  #stop(why: WriterStop): undefined {
    if (this.#stopped) return undefined;
    this.#stopped = why;
    this.#options.onStop(why);
    this.#releaseWaiters();
    return undefined;
  }

  async #writeAll(): Promise<void> {
    while (this.#buffer.length > 0 && (this.#stopped === undefined || this.#stopped.startsWith('max_'))) {
      const entries = this.#buffer;
      const append = { entries, bytes: this.#bufferBytes, last_hermes_seq: this.#bufferSeq };
      this.#buffer = [];
      this.#bufferBytes = 0;
      this.#bufferSeq = null;
      this.#releaseWaiters();
      const { store, key, owner } = this.#options;
      try {
        if (await store.append(key, owner, append)) {
          this.#committed = { next: (entries[entries.length - 1] as JournalEntry).sequence + 1, bytes: this.#committed.bytes + append.bytes };
        } else this.#stop('lease_lost');
      } catch {
        this.#stop('ledger_failed');
      }
    }
    this.#buffer = [];
    this.#writing = undefined;
    this.#releaseWaiters();
  }

  #releaseWaiters(): void {
    for (const resolve of this.#drainWaiters.splice(0)) resolve();
  }
}
