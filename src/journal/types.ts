import type { HermesSseEvent } from '../contract/aip.js';

/** A journal's run, as one tenant sees it (tenant ids are per record, like run bindings). */
export interface JournalKey {
  tenant_id: string | null;
  endpoint_id: string;
  run_id: string;
}

/**
 * Journals a connector may take over and purge: those of one of its endpoints, and of a tenant that
 * endpoint serves. An endpoint bound to a tenant serves only that tenant (the tenant gate refuses any
 * other, and its Hermes is that tenant's); an unbound one serves every tenant, as the gate lets any
 * through. So two connectors of two tenants sharing a ledger and an endpoint id never touch each
 * other's journals when their endpoints are bound to their tenants.
 */
export interface JournalScope {
  endpoint_id: string;
  /** The tenant the endpoint is bound to; absent: any tenant, or none. */
  tenant_id?: string;
}

/**
 * following: a follower holds it (through its lease) and appends; complete: the terminal event is in it;
 * reconciled: the stream ended without one and a status read found the run terminal; truncated: a limit
 * (events, bytes, total bytes, the follow deadline) stopped it; abandoned: the run could no longer be read.
 */
export type JournalState = 'following' | 'complete' | 'reconciled' | 'truncated' | 'abandoned';

/** The outbox rows a journal is created with: one per delivery target, held by the outbox's deliverer. */
export interface JournalDeliveries {
  owner: string;
  leaseExpiresAt: number;
  targetIds: readonly string[];
  /** A target with this many pending deliveries gets this run's given up at once (`outbox_full`). */
  maxPendingPerTarget: number;
}

/** A gap recorded instead of pretending the journal is whole: events after `after_sequence` may be missing. */
export interface EventsLost {
  after_sequence: number;
  reason: string;
}

export interface JournalRecord extends JournalKey {
  state: JournalState;
  owner: string | null;
  lease_expires_at: number | null;
  /** The sequence the next appended event gets; sequences start at 1. */
  next_sequence: number;
  /** The `seq` Hermes gave the latest appended event, when it numbers its events: where a takeover resumes. */
  last_hermes_seq: number | null;
  /** Bytes of the stored events (their JSON text). */
  bytes: number;
  events_lost: EventsLost[];
  created_at: number;
  closed_at: number | null;
  close_reason: string | null;
}

export interface JournalEntry {
  sequence: number;
  event: HermesSseEvent;
}

/** What one append adds: the events in order, their size, and the newest Hermes `seq` among them. */
export interface JournalAppend {
  entries: JournalEntry[];
  bytes: number;
  last_hermes_seq: number | null;
}

/** A journal's end. */
export interface JournalClose {
  state: Exclude<JournalState, 'following'>;
  reason: string;
  now: number;
}

/**
 * Durable storage of run journals, provided by the SQL ledgers. Every write that changes a journal
 * names its owner and changes nothing once another owner holds it.
 */
export interface JournalStore {
  /**
   * Creates the journal held by `owner`, unless the tenant already has one for the run; true when created.
   * With `deliveries`, its outbox rows too, in the same transaction: one per target, held by the deliverer.
   */
  create(key: JournalKey, owner: string, now: number, leaseExpiresAt: number, deliveries?: JournalDeliveries): Promise<boolean>;
  journal(key: JournalKey): Promise<JournalRecord | null>;
  /** Whether another tenant journals this run (its events are not this tenant's to read). */
  journaledForAnotherTenant(key: JournalKey): Promise<boolean>;
  /**
   * Appends events (idempotent per sequence), queuing them for the run's pending deliveries in the same
   * transaction; false when the journal is no longer the owner's or no longer following.
   */
  append(key: JournalKey, owner: string, append: JournalAppend): Promise<boolean>;
  /** Records a gap; false when the journal is not the owner's. */
  recordLoss(key: JournalKey, owner: string, lost: EventsLost[]): Promise<boolean>;
  close(key: JournalKey, owner: string, close: JournalClose): Promise<boolean>;
  /** Extends every following journal the owner holds. */
  renewOwned(owner: string, leaseExpiresAt: number): Promise<void>;
  /**
   * Takes over up to `limit` following journals within `scopes` whose lease expired before `now`
   * (a replica configured with other endpoints or tenants leaves theirs alone); returns them as now held.
   */
  takeOver(owner: string, now: number, leaseExpiresAt: number, limit: number, scopes: readonly JournalScope[]): Promise<JournalRecord[]>;
  /** Events after `afterSequence`, in order, at most `limit`. */
  events(key: JournalKey, afterSequence: number, limit: number): Promise<JournalEntry[]>;
  /** Bytes of every stored journal. */
  totalBytes(): Promise<number>;
  /**
   * Deletes journals within `scopes` closed at or before `closedBefore`, with their events; returns how
   * many. A delivery still pending on a deleted journal is given up first (`retention`), and ended
   * deliveries last updated at or before `closedBefore` are deleted (their evidence lives as long as a journal).
   */
  purge(closedBefore: number, scopes: readonly JournalScope[], now: number): Promise<number>;
  /** Calls `onChange` after any append or close of the journal that is committed (from any replica the backend can reach). */
  subscribe(key: JournalKey, onChange: () => void): () => void;
}

/** The property through which a durable ledger offers its journal store. */
export const JOURNAL_STORE = Symbol.for('aip-connector-hermes-agent.journalStore');

/** A ledger that keeps run journals (the SQLite and PostgreSQL ones). */
export interface JournalKeeper {
  readonly [JOURNAL_STORE]: JournalStore;
}

/** The journal store a ledger offers, if it is one that keeps journals. */
export function journalStoreOf(ledger: unknown): JournalStore | undefined {
  return typeof ledger === 'object' && ledger !== null && JOURNAL_STORE in ledger ? (ledger as JournalKeeper)[JOURNAL_STORE] : undefined;
}

export interface ResolvedJournalOptions {
  readonly followersPerEndpoint: number;
  readonly maxEventsPerRun: number;
  readonly maxBytesPerRun: number;
  readonly maxTotalBytes: number;
  readonly retentionMs: number;
  readonly followLimitMs: number;
  readonly leaseMs: number;
}

/** The journal's settings as given (connector option `journal`, config file field `"journal"`). */
export type JournalOptions = Partial<ResolvedJournalOptions>;
