import type { HermesSseEvent } from '../contract/aip.js';
import type { JournalKey, JournalScope } from '../journal/types.js';

/**
 * One journaled event as a delivery target receives it. `id` is stable for (target, tenant, endpoint,
 * run, sequence): every attempt, by any replica, sends the same id, so receivers deduplicate by it.
 * A webhook sends it as `webhook-id`, which Standard Webhooks signs as `id.timestamp.body`: it must be 1 to
 * 256 characters of `A-Z a-z 0-9 _ : -` (no `.`), or the webhook refuses the event.
 */
export interface OutboxEvent {
  readonly id: string;
  readonly key: JournalKey;
  /** The journal's sequence of the event (1, 2, …): events of one run reach a target in this order. */
  readonly sequence: number;
  readonly event: HermesSseEvent;
}

/**
 * What one delivery attempt came to.
 * - delivered: the target took every event of the batch.
 * - retry: a temporary failure (down, slow, 5xx, 429, garbage, back-pressure); tried again with back-off,
 *   not before `afterMs` when given (the target asked for a pause), until the delivery's bounded age.
 * - refused: retrying cannot help (the target said the events are invalid, or it is gone): the
 *   delivery is given up now, with `reason` as its evidence.
 */
export type DeliveryOutcome =
  | { readonly kind: 'delivered' }
  | { readonly kind: 'retry'; readonly reason: string; readonly afterMs?: number }
  | { readonly kind: 'refused'; readonly reason: string };

/**
 * Somewhere the connector delivers run events to from the durable outbox: a Standard Webhooks
 * endpoint, or the AIP runtime's connector-event ingress.
 */
export interface DeliveryTarget {
  /**
   * Names the target in the outbox, stable across restarts and identical on every replica configured
   * with it (a replica delivers, and takes over, only deliveries of targets it has). Never a secret.
   */
  readonly id: string;
  /** Most events one `deliver` call takes (1 for a webhook: one message per webhook-id). */
  readonly maxBatch: number;
  /** Whether the target wants this event; the others are passed over (and count as delivered). */
  accepts(event: HermesSseEvent): boolean;
  /**
   * Delivers consecutive accepted events of one run, in order. Never rejects: every failure is an
   * outcome. Ends promptly when `signal` aborts (the connector is closing), with a `retry`.
   */
  deliver(events: readonly OutboxEvent[], signal: AbortSignal): Promise<DeliveryOutcome>;
}

/**
 * pending: events are (or may yet be) owed to the target; delivered: the journal is closed and every
 * event of it reached the target (or was passed over); given_up: recorded with its reason and the
 * undelivered range, never dropped silently.
 */
export type DeliveryState = 'pending' | 'delivered' | 'given_up';

/**
 * Why a delivery was given up: max_age (retried past `delivery.maxAgeMs` from its first failure),
 * refused (the target said retrying cannot help), outbox_full (the run started while the target
 * had `maxPendingPerTarget` open deliveries), retention (the journal was purged first).
 */
export type GiveUpReason = 'max_age' | 'refused' | 'outbox_full' | 'retention';

/** One (run, target) delivery as the outbox records it: the evidence `connector.deliveries()` returns. */
export interface DeliveryRecord extends JournalKey {
  target_id: string;
  state: DeliveryState;
  owner: string | null;
  lease_expires_at: number | null;
  /** The journal sequence every event up to which reached the target (or was passed over); 0: none yet. */
  delivered_through: number;
  /** The journal's last sequence when last appended to: the events up to it are queued. */
  queued_through: number;
  /** Failed attempts since the last delivered batch. */
  attempts: number;
  next_attempt_at: number | null;
  /** When the current run of failures began: the delivery's age counts from it. */
  first_failure_at: number | null;
  last_error: string | null;
  given_up_reason: GiveUpReason | null;
  created_at: number;
  updated_at: number;
}

/** A failed attempt, recorded on the delivery. */
export interface DeliveryFailure {
  attempts: number;
  first_failure_at: number;
  next_attempt_at: number;
  last_error: string;
  now: number;
}

/** Which deliveries `DeliveryStore.list` returns, newest first. */
export interface DeliveryQuery {
  run_id?: string;
  /** A tenant (null: no tenant); absent: every tenant. */
  tenant_id?: string | null;
  target_id?: string;
  state?: DeliveryState;
  limit: number;
}

/**
 * Durable storage of the outbox, provided by the SQL ledgers beside their journal store (rows are
 * created and queued by `JournalStore.create` and `append`). Every write that changes a held
 * delivery names its owner and changes nothing once another owner holds it.
 */
export interface DeliveryStore {
  /** Extends the lease of every pending delivery the owner holds. */
  renewOwned(owner: string, leaseExpiresAt: number): Promise<void>;
  /**
   * Takes up to `limit` pending deliveries of `targetIds`, within `scopes`, that no one holds or whose
   * lease expired before `now` (compare-and-set: of several replicas sweeping at once, one takes each).
   */
  takeOver(
    owner: string,
    now: number,
    leaseExpiresAt: number,
    limit: number,
    targetIds: readonly string[],
    scopes: readonly JournalScope[],
  ): Promise<DeliveryRecord[]>;
  /** Records that events up to `deliveredThrough` reached the target, clearing the failures; false when no longer the owner's. */
  advance(key: JournalKey, targetId: string, owner: string, deliveredThrough: number, now: number): Promise<boolean>;
  recordFailure(key: JournalKey, targetId: string, owner: string, failure: DeliveryFailure): Promise<boolean>;
  /** Ends a held delivery: `delivered`, or `given_up` with its reason and last error. */
  finish(key: JournalKey, targetId: string, owner: string, end: DeliveryEnd): Promise<boolean>;
  delivery(key: JournalKey, targetId: string): Promise<DeliveryRecord | null>;
  list(query: DeliveryQuery): Promise<DeliveryRecord[]>;
}

export type DeliveryEnd =
  | { readonly state: 'delivered'; readonly now: number }
  | { readonly state: 'given_up'; readonly reason: GiveUpReason; readonly lastError: string | null; readonly now: number };

/** The property through which a durable ledger offers its outbox. */
export const DELIVERY_STORE = Symbol.for('aip-connector-hermes-agent.deliveryStore');

/** The outbox a ledger offers, if it is one that keeps journals. */
export function deliveryStoreOf(ledger: unknown): DeliveryStore | undefined {
  return typeof ledger === 'object' && ledger !== null && DELIVERY_STORE in ledger
    ? (ledger as { [DELIVERY_STORE]: DeliveryStore })[DELIVERY_STORE]
    : undefined;
}

export interface ResolvedDeliveryOptions {
  /** How long a delivery is retried from its first failure before it is given up (`max_age`). */
  readonly maxAgeMs: number;
  /** Open (pending) deliveries per target; a run started past it gets its delivery given up as `outbox_full`. */
  readonly maxPendingPerTarget: number;
  /** Runs delivered to one target at once (each run strictly one batch at a time). */
  readonly concurrencyPerTarget: number;
  /** One attempt's limit: past it the attempt is aborted and retried. */
  readonly attemptTimeoutMs: number;
  /** How long a replica holds a delivery without renewing it before another may take it over. */
  readonly leaseMs: number;
}

/** The outbox's settings as given (connector option `delivery`, config file field `"delivery"`). */
export type DeliveryOptions = Partial<ResolvedDeliveryOptions>;
