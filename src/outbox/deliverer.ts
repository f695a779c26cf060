import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { errorName } from '../internal/logger.js';
import { startLeaseTimers } from '../internal/lease-timers.js';
import type { JournalDeliveries, JournalEntry, JournalKey, JournalScope, JournalStore } from '../journal/types.js';
import { retryDelayMs } from './backoff.js';
import { outboxEventId } from './event-id.js';
import type { DeliveryOutcome, DeliveryRecord, DeliveryStore, DeliveryTarget, GiveUpReason, OutboxEvent, ResolvedDeliveryOptions } from './types.js';

export interface DelivererDeps {
  journal: JournalStore;
  store: DeliveryStore;
  targets: readonly DeliveryTarget[];
  /** The endpoints (and tenants) this connector serves: only their deliveries are taken over. */
  scopes: readonly JournalScope[];
  options: ResolvedDeliveryOptions;
  now: () => number;
  logger: Logger;
}

/** Deliveries taken over per sweep: the rest wait for the next one. */
const TAKEOVER_BATCH = 100;
/** Journal events read per pass (the ones a target does not accept are passed over). */
const READ_BATCH = 256;
/** Longest error text kept on a delivery. */
const MAX_ERROR_CHARS = 1000;

/** A delivery this replica holds. */
interface Held {
  key: JournalKey;
  target: DeliveryTarget;
  record: DeliveryRecord;
  /** Read back from the ledger once before the first attempt (a row created at the bound is given up already). */
  confirmed: boolean;
  unsubscribe: () => void;
  timer: NodeJS.Timeout | undefined;
  running: boolean;
  /** Woken while running: another pass follows. */
  again: boolean;
}

type Pass = 'more' | 'idle' | 'dropped';

/**
 * The outbox's delivery engine: each (run, target) delivery is held through a lease renewed for all
 * of them in one statement, and driven by one loop at a time, so a run's events reach a target in
 * journal order, one batch in flight. Wake-ups come from the journal's tail (an append or a close,
 * from any replica the backend reaches), from back-off timers, and from a sweep every lease period
 * that also takes over deliveries whose holder's lease lapsed. At most `concurrencyPerTarget` runs
 * are delivered to one target at once; nothing here ever waits on the path of an action.
 */
export class Deliverer {
  readonly owner = `outbox_${randomUUID()}`;
  readonly #deps: DelivererDeps;
  readonly #held = new Map<string, Held>();
  /** Runs whose journal create failed but may have committed their deliveries (held by this owner): looked up at each sweep. */
  readonly #uncertain = new Map<string, JournalKey>();
  readonly #slots = new Map<string, { active: number; waiting: Array<() => void> }>();
  readonly #attempts = new Set<AbortController>();
  readonly #working = new Set<Promise<void>>();
  #timers: NodeJS.Timeout[] = [];
  #closed = false;

  constructor(deps: DelivererDeps) {
    this.#deps = deps;
  }

  /** The rows a new journal is created with, held by this deliverer. */
  deliveriesFor(now: number): JournalDeliveries {
    const { targets, options } = this.#deps;
    return {
      owner: this.owner,
      leaseExpiresAt: now + options.leaseMs,
      targetIds: targets.map((target) => target.id),
      maxPendingPerTarget: options.maxPendingPerTarget,
    };
  }

  /** Starts the lease renewal and the sweep (the first on the next turn). */
  start(): void {
    this.#timers = startLeaseTimers(
      this.#deps.options.leaseMs,
      () => this.#renew(),
      () => this.#sweep(),
    );
  }

  /** A journal this replica just created with its deliveries: they are held from the start. */
  begun(key: JournalKey): void {
    const now = this.#deps.now();
    for (const target of this.#deps.targets) this.#hold(newDelivery(key, target.id, this.owner, now + this.#deps.options.leaseMs, now), false);
  }

  /** A journal create that threw may have committed its deliveries, held by this owner and renewed: the next sweeps hold them if so. */
  uncertain(key: JournalKey): void {
    this.#uncertain.set(JSON.stringify([key.tenant_id, key.endpoint_id, key.run_id]), key);
  }

  async #holdUncertain(): Promise<void> {
    for (const [id, key] of [...this.#uncertain]) {
      const records = await Promise.all(this.#deps.targets.map((target) => this.#deps.store.delivery(key, target.id)));
      this.#uncertain.delete(id);
      for (const record of records) if (record?.state === 'pending' && record.owner === this.owner) this.#hold(record, true);
    }
  }

  /** Stops taking work; attempts in flight are aborted (they end as retries) and leases lapse for another replica. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers = [];
    for (const controller of this.#attempts) controller.abort();
    for (const held of [...this.#held.values()]) this.#drop(held);
    for (const slot of this.#slots.values()) for (const resume of slot.waiting.splice(0)) resume();
    await Promise.allSettled([...this.#working]);
  }

  #hold(record: DeliveryRecord, confirmed: boolean): void {
    const target = this.#deps.targets.find((candidate) => candidate.id === record.target_id);
    const id = JSON.stringify([record.tenant_id, record.endpoint_id, record.run_id, record.target_id]);
    if (this.#closed || !target || this.#held.has(id)) return;
    const key = { tenant_id: record.tenant_id, endpoint_id: record.endpoint_id, run_id: record.run_id };
    const held: Held = { key, target, record, confirmed, unsubscribe: () => undefined, timer: undefined, running: false, again: false };
    this.#held.set(id, held);
    held.unsubscribe = this.#deps.journal.subscribe(key, () => this.#wake(held));
    this.#wake(held);
  }

  #drop(held: Held): void {
    held.unsubscribe();
    clearTimeout(held.timer);
    this.#held.delete(JSON.stringify([held.key.tenant_id, held.key.endpoint_id, held.key.run_id, held.target.id]));
  }

  #wake(held: Held): void {
    if (this.#closed) return;
    if (held.running) {
      held.again = true;
      return;
    }
    held.running = true;
    const working = this.#drive(held)
      .catch((error: unknown) => this.#logLedgerFailure(error, 'deliver'))
      .finally(() => {
        held.running = false;
        this.#working.delete(working);
      });
    this.#working.add(working);
  }

  /** Passes over the delivery until it waits for news, within one of its target's slots. */
  async #drive(held: Held): Promise<void> {
    await this.#acquire(held.target.id);
    try {
      let pass: Pass = 'more';
      while (!this.#closed && (pass === 'more' || held.again)) {
        held.again = false;
        pass = await this.#withinDeadline(this.#pass(held));
        if (pass === 'dropped') return this.#drop(held);
      }
    } finally {
      this.#release(held.target.id);
    }
  }

  /**
   * A pass that outlives its attempt's limit and two lease periods is taken as stuck (a ledger query on a
   * connection that died may never settle: seen once in ten PostgreSQL crash tortures): it fails, which
   * frees the delivery and its target slot, and the next sweep drives the delivery again.
   */
  async #withinDeadline(pass: Promise<Pass>): Promise<Pass> {
    const { attemptTimeoutMs, leaseMs } = this.#deps.options;
    let timer: NodeJS.Timeout | undefined;
    const stuck = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`delivery pass stuck for ${attemptTimeoutMs + 2 * leaseMs} ms`)), attemptTimeoutMs + 2 * leaseMs);
    });
    // The pass given up may still settle, or fail, later: nobody waits for it then.
    pass.catch(() => undefined);
    try {
      return await Promise.race([pass, stuck]);
    } finally {
      clearTimeout(timer);
    }
  }

  async #pass(held: Held): Promise<Pass> {
    const { journal, store, now } = this.#deps;
    if (!held.confirmed) {
      const stored = await store.delivery(held.key, held.target.id);
      if (stored?.state !== 'pending' || stored.owner !== this.owner) return 'dropped';
      held.record = stored;
      held.confirmed = true;
    }
    const { record } = held;
    if (record.next_attempt_at !== null && record.next_attempt_at > now()) {
      clearTimeout(held.timer);
      held.timer = setTimeout(() => this.#wake(held), record.next_attempt_at - now());
      held.timer.unref();
      return 'idle';
    }
    const entries = await journal.events(held.key, record.delivered_through, READ_BATCH);
    if (entries.length === 0) return this.#endIfComplete(held);
    const { batch, through } = nextBatch(entries, held);
    if (batch.length === 0) return this.#advance(held, through);
    const outcome = await this.#attempt(held.target, batch);
    // Aborted by close(): the lease lapses, and whoever holds the delivery next sends the batch again.
    if (this.#closed) return 'idle';
    if (outcome.kind === 'delivered') return this.#advance(held, through);
    if (outcome.kind === 'refused') return this.#giveUp(held, 'refused', outcome.reason);
    return this.#retryLater(held, outcome.reason, outcome.afterMs);
  }

  /** One call of the target, aborted past `attemptTimeoutMs` or at close; whatever goes wrong is a retry. */
  async #attempt(target: DeliveryTarget, batch: OutboxEvent[]): Promise<DeliveryOutcome> {
    const controller = new AbortController();
    this.#attempts.add(controller);
    const timeout = setTimeout(() => controller.abort(), this.#deps.options.attemptTimeoutMs);
    try {
      // A target that ignores the abort is not waited for: neither close() nor the delivery hangs on it.
      const outcome = await Promise.race([target.deliver(batch, controller.signal), abortedOutcome(controller.signal)]);
      if (controller.signal.aborted && outcome?.kind !== 'delivered') return { kind: 'retry', reason: 'attempt_timeout' };
      return isOutcome(outcome) ? outcome : { kind: 'retry', reason: 'the target answered with no valid outcome' };
    } catch (error) {
      return { kind: 'retry', reason: `the target threw: ${errorName(error)}` };
    } finally {
      clearTimeout(timeout);
      this.#attempts.delete(controller);
    }
  }

  async #advance(held: Held, through: number): Promise<Pass> {
    const now = this.#deps.now();
    if (!(await this.#deps.store.advance(held.key, held.target.id, this.owner, through, now))) return 'dropped';
    held.record = { ...held.record, delivered_through: through, attempts: 0, next_attempt_at: null, first_failure_at: null, last_error: null };
    return 'more';
  }

  /** Nothing left to send: done if the journal is closed and every event of it is delivered. */
  async #endIfComplete(held: Held): Promise<Pass> {
    const journal = await this.#deps.journal.journal(held.key);
    // Purged: the purge gave the delivery up (retention) in the same transaction.
    if (!journal) return 'dropped';
    if (journal.state === 'following') return 'idle';
    // Appended between the read of the events and the read of the journal: read again.
    if (journal.next_sequence - 1 > held.record.delivered_through) return 'more';
    await this.#deps.store.finish(held.key, held.target.id, this.owner, { state: 'delivered', now: this.#deps.now() });
    return 'dropped';
  }

  async #retryLater(held: Held, reason: string, afterMs: number | undefined): Promise<Pass> {
    const now = this.#deps.now();
    const firstFailureAt = held.record.first_failure_at ?? now;
    if (now - firstFailureAt >= this.#deps.options.maxAgeMs) return this.#giveUp(held, 'max_age', reason);
    const attempts = held.record.attempts + 1;
    const asked = typeof afterMs === 'number' && Number.isFinite(afterMs) && afterMs > 0 ? afterMs : undefined;
    const failure = { attempts, first_failure_at: firstFailureAt, next_attempt_at: now + retryDelayMs(attempts, asked), last_error: clip(reason), now };
    this.#log('run event delivery failed; retrying', held, { attempts, reason: clip(reason), retry_in_ms: failure.next_attempt_at - now });
    if (!(await this.#deps.store.recordFailure(held.key, held.target.id, this.owner, failure))) return 'dropped';
    held.record = { ...held.record, ...failure };
    return 'more';
  }

  async #giveUp(held: Held, reason: GiveUpReason, lastError: string): Promise<Pass> {
    const { record } = held;
    this.#log('run event delivery given up', held, {
      given_up_reason: reason,
      reason: clip(lastError),
      undelivered_after_sequence: record.delivered_through,
      attempts: record.attempts,
    });
    await this.#deps.store.finish(held.key, held.target.id, this.owner, { state: 'given_up', reason, lastError: clip(lastError), now: this.#deps.now() });
    return 'dropped';
  }

  async #acquire(targetId: string): Promise<void> {
    let slot = this.#slots.get(targetId);
    if (!slot) {
      slot = { active: 0, waiting: [] };
      this.#slots.set(targetId, slot);
    }
    if (slot.active < this.#deps.options.concurrencyPerTarget || this.#closed) {
      slot.active++;
      return;
    }
    const queued = slot;
    await new Promise<void>((resume) => queued.waiting.push(resume));
    queued.active++;
  }

  #release(targetId: string): void {
    const slot = this.#slots.get(targetId);
    if (!slot) return;
    slot.active--;
    slot.waiting.shift()?.();
  }

  async #renew(): Promise<void> {
    const { store, options, now } = this.#deps;
    await store.renewOwned(this.owner, now() + options.leaseMs).catch((error: unknown) => this.#logLedgerFailure(error, 'renew leases'));
  }

  /** Takes over lapsed deliveries, and wakes every held one (the slow poll behind the tail's wake-ups). */
  async #sweep(): Promise<void> {
    if (this.#closed) return;
    const { store, options, now, targets, scopes } = this.#deps;
    try {
      await this.#holdUncertain();
      const ids = targets.map((target) => target.id);
      for (const record of await store.takeOver(this.owner, now(), now() + options.leaseMs, TAKEOVER_BATCH, ids, scopes)) this.#hold(record, true);
    } catch (error) {
      this.#logLedgerFailure(error, 'sweep');
    }
    for (const held of this.#held.values()) this.#wake(held);
  }

  #log(message: string, held: Held, fields: Record<string, unknown>): void {
    const { key, target } = held;
    this.#deps.logger.warn({ target_id: target.id, endpoint_id: key.endpoint_id, run_id: key.run_id, ...fields }, message);
  }

  #logLedgerFailure(error: unknown, stage: string): void {
    this.#deps.logger.error({ err: errorName(error), stage }, 'run event outbox ledger failed');
  }
}

/**
 * The next batch: up to `maxBatch` consecutive accepted events, and the sequence through which the
 * batch (with the events passed over before and within it) reaches.
 */
function nextBatch(entries: JournalEntry[], { key, target }: Held): { batch: OutboxEvent[]; through: number } {
  const batch: OutboxEvent[] = [];
  let through = 0;
  for (const { sequence, event } of entries) {
    if (batch.length >= target.maxBatch) break;
    through = sequence;
    if (target.accepts(event)) batch.push({ id: outboxEventId(target.id, key, sequence), key, sequence, event });
  }
  return { batch, through };
}

/** Resolves once the attempt is aborted, as the retry it then is. */
function abortedOutcome(signal: AbortSignal): Promise<DeliveryOutcome> {
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve({ kind: 'retry', reason: 'attempt_timeout' }), { once: true }));
}

function isOutcome(outcome: unknown): outcome is DeliveryOutcome {
  const kind = (outcome as { kind?: unknown } | null | undefined)?.kind;
  const reason = (outcome as { reason?: unknown }).reason;
  return kind === 'delivered' || ((kind === 'retry' || kind === 'refused') && typeof reason === 'string');
}

const clip = (text: string): string => (text.length <= MAX_ERROR_CHARS ? text : `${text.slice(0, MAX_ERROR_CHARS)}…`);

/** The row `JournalStore.create` stores for a target (confirmed against the ledger before the first attempt). */
function newDelivery(key: JournalKey, targetId: string, owner: string, leaseExpiresAt: number, now: number): DeliveryRecord {
  return {
    ...key,
    target_id: targetId,
    state: 'pending',
    owner,
    lease_expires_at: leaseExpiresAt,
    delivered_through: 0,
    queued_through: 0,
    attempts: 0,
    next_attempt_at: null,
    first_failure_at: null,
    last_error: null,
    given_up_reason: null,
    created_at: now,
    updated_at: now,
  };
}
