import type { SqlStatement } from './group-commit.js';

/**
 * How a journal's readers learn that it changed: a backend either adds a statement to the write's
 * own transaction (PostgreSQL NOTIFY, delivered once it commits, to every replica listening), or is
 * told after the commit (SQLite, within one process).
 */
export interface JournalTail {
  /** A statement to commit with the change, if the backend announces changes that way. */
  announce(topic: string): SqlStatement | undefined;
  /** Called once a change is committed. */
  committed(topic: string): void;
  subscribe(topic: string, onChange: () => void): () => void;
  close(): Promise<void>;
}

/** Listeners per topic, and how to call them all (a listener that throws is the reader's fault, never the writer's). */
export class TopicListeners {
  readonly #listeners = new Map<string, Set<() => void>>();

  add(topic: string, listener: () => void): () => void {
    const set = this.#listeners.get(topic) ?? new Set();
    this.#listeners.set(topic, set.add(listener));
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.#listeners.get(topic) === set) this.#listeners.delete(topic);
    };
  }

  call(topic: string): void {
    for (const listener of this.#listeners.get(topic) ?? []) callSafely(listener);
  }

  /** Every listener: after a gap in delivery (a reconnect), each reader must read again. */
  callAll(): void {
    for (const set of this.#listeners.values()) for (const listener of set) callSafely(listener);
  }
}

function callSafely(listener: () => void): void {
  try {
    listener();
  } catch {
    // A reader's wake-up never fails the writer.
  }
}

/** SQLite: the processes sharing a file share no channel, so readers in this process hear of the changes this process commits. */
const processTopics = new Map<string, TopicListeners>();

/** The in-process tail of one SQLite database (`database`: its resolved file, or a unique name for `:memory:`). */
export function inProcessTail(database: string): JournalTail {
  let listeners = processTopics.get(database);
  if (!listeners) {
    listeners = new TopicListeners();
    processTopics.set(database, listeners);
  }
  const shared = listeners;
  return {
    announce: () => undefined,
    committed: (topic) => shared.call(topic),
    subscribe: (topic, onChange) => shared.add(topic, onChange),
    async close() {},
  };
}
