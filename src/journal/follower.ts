import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { AipActionResult, AipStreamChunk, EventsLostRange, HermesSseEvent, RunEventsOutput } from '../contract/aip.js';
import { TERMINAL_EVENTS, TERMINAL_STATUSES } from '../contract/hermes-vocabulary.js';
import { errorName } from '../internal/logger.js';
import { startLeaseTimers } from '../internal/lease-timers.js';
import { AppendWriter, type WriterStop } from './append-writer.js';
import type { EventsLost, JournalClose, JournalDeliveries, JournalKey, JournalRecord, JournalScope, JournalStore, ResolvedJournalOptions } from './types.js';

/** One read of a run's event stream, through the connector's run_events path (never the journal itself). */
export interface FollowRead {
  key: JournalKey;
  /** Resume after this Hermes `seq` (`?last_seq=`): the journal was taken over from a follower that numbered its events. */
  resumeAfterSeq: number | undefined;
  maxEvents: number;
  deadline: number;
  signal: AbortSignal;
  /** Each range of events Hermes no longer kept, as the read finds it: recorded before the events after it are appended. */
  onEventsLost(lost: EventsLostRange): Promise<void>;
  onChunk(chunk: AipStreamChunk): Promise<void> | undefined;
}

export interface RunJournalDeps {
  store: JournalStore;
  /** The endpoints this connector can read, each with the tenant it serves: only their journals are taken over and purged. */
  scopes: readonly JournalScope[];
  options: ResolvedJournalOptions;
  now: () => number;
  logger: Logger;
  /** run_events for the follower; resolves with its result, never rejects. */
  read(follow: FollowRead): Promise<AipActionResult>;
  seqOf(event: HermesSseEvent): number | undefined;
}

/** Streams opened for one run before the follower gives up on it (a stream cut while the run goes on is opened again). */
const MAX_READS_PER_RUN = 3;
/** Journals taken over per sweep: the rest wait for the next one. */
const TAKEOVER_BATCH = 100;

/** A followed run: its journal as held, and whether it was taken over from another follower. */
interface Held {
  record: JournalRecord;
  takenOver: boolean;
}

/**
 * The journal's followers: one per run the connector started, at most `followersPerEndpoint` at once
 * per endpoint (the rest wait in arrival order), each holding its journal through a lease renewed for
 * every journal this instance holds in one statement. A sweep (at start, then every lease period)
 * takes over journals whose lease expired, purges those past retention and re-reads the total size.
 */
export class RunJournal {
  readonly owner = `journal_${randomUUID()}`;
  readonly #deps: RunJournalDeps;
  readonly #queues = new Map<string, { active: number; waiting: Held[] }>();
  readonly #following = new Set<Promise<void>>();
  /** Closing writes the ledger failed, by journal: tried again at each renewal. */
  readonly #unfinished = new Map<string, () => Promise<void>>();
  /** Journals whose create failed but may have committed (its answer lost): looked up at each sweep. */
  readonly #uncertain = new Map<string, JournalKey>();
  #timers: NodeJS.Timeout[] = [];
  #totalBytes = 0;
  #closed = false;

  constructor(deps: RunJournalDeps) {
    this.#deps = deps;
  }

  /** Starts the lease renewal and the sweep (the first sweep on the next turn: creating a connector does no I/O). */
  start(): void {
    this.#timers = startLeaseTimers(
      this.#deps.options.leaseMs,
      () => this.#renew(),
      () => this.#sweep(),
    );
  }

  /**
   * A run the connector just started: its journal (and its outbox rows, when given) is created, held by
   * this instance, before run_start answers. True when this call created it.
   */
  async begin(key: JournalKey, deliveries?: (now: number) => JournalDeliveries): Promise<boolean> {
    if (this.#closed) return false;
    const now = this.#deps.now();
    const leaseExpiresAt = now + this.#deps.options.leaseMs;
    if (!(await this.#deps.store.create(key, this.owner, now, leaseExpiresAt, deliveries?.(now)))) return false;
    this.#enqueue({ record: newJournal(key, this.owner, now, leaseExpiresAt), takenOver: false });
    return true;
  }

  /**
   * A begin() that threw: its create may have committed all the same (a connection ended on the commit),
   * leaving a journal this replica owns, and so renews, but does not follow. The next sweeps read it and,
   * if it is there and this replica's, follow it.
   */
  uncertain(key: JournalKey): void {
    this.#uncertain.set(JSON.stringify([key.tenant_id, key.endpoint_id, key.run_id]), key);
  }

  async #followUncertain(): Promise<void> {
    for (const [id, key] of [...this.#uncertain]) {
      const record = await this.#deps.store.journal(key);
      this.#uncertain.delete(id);
      if (record?.state === 'following' && record.owner === this.owner) this.#enqueue({ record, takenOver: true });
    }
  }

  /** Stops following: reads in flight end as cancelled (the connector's close), and leases lapse for another replica to take over. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers = [];
    for (const queue of this.#queues.values()) queue.waiting = [];
    await Promise.allSettled([...this.#following]);
  }

  #enqueue(held: Held): void {
    const endpoint = held.record.endpoint_id;
    let queue = this.#queues.get(endpoint);
    if (!queue) {
      queue = { active: 0, waiting: [] };
      this.#queues.set(endpoint, queue);
    }
    queue.waiting.push(held);
    this.#startWaiting(queue);
  }

  #startWaiting(queue: { active: number; waiting: Held[] }): void {
    while (!this.#closed && queue.active < this.#deps.options.followersPerEndpoint && queue.waiting.length > 0) {
      const held = queue.waiting.shift() as Held;
      queue.active++;
      const following = this.#follow(held)
        .catch((error: unknown) => this.#deps.logger.error({ err: errorName(error) }, 'run journal follower failed'))
        .finally(() => {
          queue.active--;
          this.#following.delete(following);
          this.#startWaiting(queue);
        });
      this.#following.add(following);
    }
  }

  async #follow({ record, takenOver }: Held): Promise<void> {
    const key: JournalKey = { tenant_id: record.tenant_id, endpoint_id: record.endpoint_id, run_id: record.run_id };
    const lost = [...record.events_lost];
    let position = { next: record.next_sequence, bytes: record.bytes, seq: record.last_hermes_seq };
    if (takenOver && (await this.#endsWithTerminal(key, position.next - 1))) {
      return this.#end(key, lost, position.next - 1, { state: 'complete', reason: 'terminal event journaled before the takeover' });
    }
    // A follower that died may have read events it never appended: only Hermes' numbering can get them back.
    if (takenOver && position.seq === null) await this.#recordLoss(key, lost, position.next - 1, 'follower_lost: Hermes does not number its events');
    for (let read = 1; read <= MAX_READS_PER_RUN; read++) {
      if (this.#totalBytes >= this.#deps.options.maxTotalBytes)
        return this.#end(key, lost, position.next - 1, { state: 'truncated', reason: 'max_total_bytes' });
      const outcome = await this.#readOnce(key, position, lost);
      position = outcome.position;
      const close = this.#closeFor(outcome.result, outcome.stop);
      if (close === 'leave') return;
      if (close) return this.#end(key, lost, position.next - 1, close);
      // The stream was cut while the run goes on: it is opened again, resuming where Hermes numbers its events.
      const output = outcome.result.output as RunEventsOutput | undefined;
      if (position.seq === null || output?.resume_fallback !== undefined) {
        await this.#recordLoss(key, lost, position.next - 1, `stream_cut: ${output?.resume_fallback ?? 'Hermes does not number its events'}`);
        if (position.seq !== null) position = { ...position, seq: null };
      }
    }
    return this.#end(key, lost, position.next - 1, { state: 'abandoned', reason: `stream_incomplete after ${MAX_READS_PER_RUN} reads` });
  }

  /** Whether the journal's last event is a terminal one (a follower that died between that append and the close). */
  async #endsWithTerminal(key: JournalKey, lastSequence: number): Promise<boolean> {
    if (lastSequence < 1) return false;
    // A ledger that fails the read: the run is followed as any other, and its stream says how it ended.
    const [last] = await this.#deps.store.events(key, lastSequence - 1, 1).catch(() => []);
    return last !== undefined && TERMINAL_EVENTS.has(last.event.event);
  }

  /**
   * Closes the journal. One that ends without its terminal event (reconciled, abandoned) records the
   * gap first: whatever Hermes sent after the last appended event is not in it. (A truncated one
   * says so in its state and reason.)
   */
  async #end(key: JournalKey, lost: EventsLost[], lastSequence: number, close: Omit<JournalClose, 'now'>): Promise<void> {
    const gap = close.state === 'reconciled' ? 'stream ended without its terminal event' : close.state === 'abandoned' ? close.reason : undefined;
    if (gap !== undefined) lost.push({ after_sequence: lastSequence, reason: gap });
    const { store, now } = this.#deps;
    await this.#finish(JSON.stringify([key.tenant_id, key.endpoint_id, key.run_id]), async () => {
      if (gap !== undefined) await store.recordLoss(key, this.owner, lost);
      await store.close(key, this.owner, { ...close, now: now() });
    });
  }

  /**
   * Runs a journal's closing writes; if the ledger fails them, they are tried again at every lease
   * renewal, so a journal whose follower is done never stays held (and renewed) as following.
   */
  async #finish(journal: string, finish: () => Promise<void>): Promise<void> {
    try {
      await finish();
      this.#unfinished.delete(journal);
    } catch (error) {
      this.#logFailure(error, 'close');
      this.#unfinished.set(journal, finish);
    }
  }

  /** One run_events read, appending every event it publishes, and recording (before the events after it) each range Hermes no longer kept. */
  async #readOnce(key: JournalKey, position: { next: number; bytes: number; seq: number | null }, lost: EventsLost[]) {
    const { options } = this.#deps;
    const controller = new AbortController();
    const writer = new AppendWriter({
      store: this.#deps.store,
      key,
      owner: this.owner,
      nextSequence: position.next,
      bytes: position.bytes,
      maxEvents: options.maxEventsPerRun,
      maxBytes: options.maxBytesPerRun,
      seqOf: this.#deps.seqOf,
      onStop: () => controller.abort(),
    });
    let seq = position.seq;
    const result = await this.#deps.read({
      key,
      resumeAfterSeq: seq ?? undefined,
      // One more than the journal may hold: reaching the journal's limit is the writer's to report.
      maxEvents: Math.min(100_000, options.maxEventsPerRun - (position.next - 1) + 1),
      deadline: this.#deps.now() + options.followLimitMs,
      signal: controller.signal,
      onEventsLost: async (gap) => {
        await writer.flushed();
        await this.#recordLoss(key, lost, writer.nextSequence - 1, `replay_truncated: Hermes no longer kept seq ${gap.from_seq}..${gap.to_seq ?? '?'}`);
      },
      onChunk: (chunk) => {
        const event = (chunk.data as { hermes_sse?: HermesSseEvent } | undefined)?.hermes_sse;
        if (event === undefined) return undefined;
        if (this.#totalBytes >= options.maxTotalBytes) writer.stop('max_total_bytes');
        seq = this.#deps.seqOf(event) ?? seq;
        return writer.push(event);
      },
    });
    await writer.flushed();
    return { result, stop: writer.stopped, position: { next: writer.nextSequence, bytes: writer.bytes, seq } };
  }

  /** How one read ends the journal: a close, 'leave' (another owner, or this process is closing), or undefined to read again. */
  #closeFor(result: AipActionResult, stop: WriterStop | undefined): Omit<JournalClose, 'now'> | 'leave' | undefined {
    if (stop === 'lease_lost') return 'leave';
    if (stop === 'ledger_failed') return { state: 'abandoned', reason: 'ledger_write_failed' };
    if (stop !== undefined) return { state: 'truncated', reason: stop };
    const output = result.output as RunEventsOutput | undefined;
    if (output?.terminal) return { state: 'complete', reason: output.terminal_event ?? 'terminal' };
    // Cut short by the connector's close: the lease lapses, and another replica or the next process goes on.
    if (this.#closed) return 'leave';
    const code = result.error?.code.slice(result.error.code.lastIndexOf('.') + 1);
    if (code === 'stream_truncated') return { state: 'truncated', reason: 'max_events_per_run' };
    if (code === 'deadline_exceeded') return { state: 'truncated', reason: 'follow_limit' };
    if (code === 'not_found') return { state: 'abandoned', reason: 'not_found' };
    if (code === 'stream_incomplete') {
      const reconciled = output?.reconciliation;
      const status = reconciled?.status?.status;
      if (typeof status === 'string' && TERMINAL_STATUSES.has(status)) return { state: 'reconciled', reason: `status ${status}` };
      if (reconciled?.http_status === 404) return { state: 'abandoned', reason: 'not_found' };
      return undefined;
    }
    return code === undefined ? undefined : { state: 'abandoned', reason: code };
  }

  async #recordLoss(key: JournalKey, lost: EventsLost[], afterSequence: number, reason: string): Promise<void> {
    lost.push({ after_sequence: afterSequence, reason });
    await this.#deps.store.recordLoss(key, this.owner, lost).catch((error: unknown) => this.#logFailure(error, 'record lost events'));
  }

  async #renew(): Promise<void> {
    const { store, options, now } = this.#deps;
    for (const [journal, finish] of [...this.#unfinished]) await this.#finish(journal, finish);
    await store.renewOwned(this.owner, now() + options.leaseMs).catch((error: unknown) => this.#logFailure(error, 'renew leases'));
  }

  async #sweep(): Promise<void> {
    if (this.#closed) return;
    const { store, options, now } = this.#deps;
    try {
      await this.#followUncertain();
      this.#totalBytes = await store.totalBytes();
      await store.purge(now() - options.retentionMs, this.#deps.scopes, now());
      const taken = await store.takeOver(this.owner, now(), now() + options.leaseMs, TAKEOVER_BATCH, this.#deps.scopes);
      for (const record of taken) this.#enqueue({ record, takenOver: true });
    } catch (error) {
      this.#logFailure(error, 'sweep');
    }
  }

  #logFailure(error: unknown, stage: string): void {
    this.#deps.logger.error({ err: errorName(error), stage }, 'run journal ledger failed');
  }
}

/** The journal create() stores. */
function newJournal(key: JournalKey, owner: string, now: number, leaseExpiresAt: number): JournalRecord {
  return {
    ...key,
    state: 'following',
    owner,
    lease_expires_at: leaseExpiresAt,
    next_sequence: 1,
    last_hermes_seq: null,
    bytes: 0,
    events_lost: [],
    created_at: now,
    closed_at: null,
    close_reason: null,
  };
}
