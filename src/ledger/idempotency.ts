import { createHash, randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { canonicalJson } from '../internal/canonical-json.js';
import { HermesFailure } from '../failures.js';
import type { AipActionResult } from '../types.js';
import type { EvidenceWrite, IdempotencyRecord, IdempotencyScope, RunLedger } from './types.js';

/** The contracts promise this: a key is honoured for 24 hours. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
const PURGE_INTERVAL_MS = 60_000;
const POLL_MIN_MS = 10;
const POLL_MAX_MS = 200;
const STORE_RETRY_MIN_MS = 250;
const STORE_RETRY_MAX_MS = 5_000;
/** How long a failed outcome write is tried again, its claim's lease renewed meanwhile; then the lease is left to run out. */
const STORE_RETRY_FOR_MS = 10 * 60_000;
/** At most this many failed writes are tried again at once: a long outage under load must not pile up retries against a recovering database. */
const MAX_LATE_WRITES = 1_000;

export interface IdempotencyGuardOptions {
  ledger: RunLedger;
  now: () => number;
  /** How long a claim stays alive without renewal before its owner is presumed dead. */
  leaseMs: number;
  /** Storage trouble after the provider call: the result still goes back to the caller, and this is told. */
  onLedgerError: (error: unknown, stage: string) => void;
  /** How a failed write tried again in the background ended. */
  onLateWrite: (what: LateWrite, outcome: 'written' | 'given_up') => void;
}

/** What a write tried again in the background records: a call's outcome, or the removal of a claim nothing was sent under. */
export type LateWrite = 'outcome' | 'claim release';

export interface GuardedCall {
  scope: IdempotencyScope;
  input: unknown;
  actionId: string;
  /** The caller's own deadline bounds how long it waits for a duplicate in flight. */
  deadline: number;
  signal: AbortSignal | undefined;
  /** The provider call: its result, and the evidence to store with its outcome. */
  execute: () => Promise<GuardedOutcome>;
  /** Shapes a failure the guard itself decides (conflict, unknown outcome, waiting ran out). */
  fail: (failure: HermesFailure) => AipActionResult;
  /**
   * Whether a call whose claim was abandoned in flight may be sent again: its provider keeps the key
   * and answers a repeat with the first call's outcome. Absent: the claim's outcome is unknown for good.
   */
  resendsAbandoned?: () => Promise<boolean>;
}

export interface GuardedOutcome {
  result: AipActionResult;
  evidence?: EvidenceWrite | undefined;
}

/**
 * Makes "idempotency: required, return_original_result" true inside the connector: one
 * provider call per (capability, key); the same input replays the stored result, another
 * input is a conflict, a duplicate in flight waits for the first, and a claim abandoned by a
 * dead process is never re-executed.
 */
export class IdempotencyGuard {
  readonly #options: IdempotencyGuardOptions;
  readonly #owner = `${hostname()}:${process.pid}:${randomBytes(6).toString('hex')}`;
  /** Each claim has an owner of its own, so a late write or clean-up can only ever touch its own claim. */
  #claims = 0;
  #lastPurge = 0;
  #closed = false;
  /** Wakes the callers waiting for a duplicate in flight, so close() need not wait out their deadlines. */
  readonly #sleepers = new Set<() => void>();
  /** Failed ledger writes being tried again in the background. */
  readonly #lateWrites = new Set<Promise<void>>();

  constructor(options: IdempotencyGuardOptions) {
    this.#options = options;
  }

  async run(call: GuardedCall): Promise<AipActionResult> {
    const { ledger, now, leaseMs } = this.#options;
    const fingerprint = fingerprintOf(call.input);
    this.#purgeNow();
    for (let attempt = 0; ; attempt++) {
      const at = now();
      const owner = `${this.#owner}:${++this.#claims}`;
      const claim = await ledger
        .claim({
          ...call.scope,
          fingerprint,
          action_id: call.actionId,
          owner,
          now: at,
          lease_expires_at: at + leaseMs,
          expires_at: at + IDEMPOTENCY_TTL_MS,
        })
        .catch((error: unknown) => {
          // The claim may have been stored all the same (the answer was lost): nothing will be sent
          // under it, so it is removed once the ledger answers again, lest a retry wait for it and
          // then call its outcome unknown.
          this.#releaseLater(call.scope, owner);
          throw error;
        });
      if (claim.claimed) return this.#execute(call, owner);
      const { record } = claim;
      if (record.fingerprint !== fingerprint) {
        return call.fail(
          new HermesFailure('idempotency_conflict', 'This idempotency key was already used with a different input for this capability', {
            details: { original_action_id: record.action_id },
          }),
        );
      }
      if (record.state === 'done' && record.result) return replay(record, call.actionId);
      if ((record.lease_expires_at ?? 0) < at) {
        if (await call.resendsAbandoned?.()) return this.#resendAbandoned(call);
        await ledger.settleAbandoned(call.scope, at, call.fail(abandoned(record)));
        continue;
      }
      const waited = await this.#wait(call, attempt);
      if (waited) return call.fail(waited);
    }
  }

  async #execute(call: GuardedCall, owner: string): Promise<AipActionResult> {
    const { ledger, onLedgerError } = this.#options;
    const renewal = this.#renewLease(call.scope, owner);
    let outcome: GuardedOutcome;
    try {
      outcome = await call.execute();
    } catch (error) {
      // Only the ledger throws here, and before the provider call: the claim is given back.
      renewal.stop();
      this.#releaseLater(call.scope, owner);
      throw error;
    }
    const { result, evidence } = outcome;
    // Effects and uncertain outcomes are kept and replayed; an outcome where the provider
    // certainly did nothing frees the key for another try. The evidence goes in the same write.
    const keep = result.status === 'completed' || result.error?.details?.uncertain_outcome === true;
    try {
      await (keep ? ledger.settle(call.scope, owner, result, evidence) : ledger.release(call.scope, owner, evidence));
      renewal.stop();
      return result;
    } catch (error) {
      onLedgerError(error, 'store outcome');
      // The caller still gets what Hermes answered. The write is tried again with the claim held,
      // so a replay waits for it; should it never succeed, the lease runs out and replays answer outcome_unknown.
      const again = keep ? () => this.#settleUnlessStored(call.scope, owner, result, evidence) : () => ledger.release(call.scope, owner, evidence);
      this.#writeLater('outcome', again, renewal);
      return withFailedWrite(result);
    }
  }

  /**
   * Sends an abandoned claim's call again, which its provider answers with the first call's outcome
   * (or acts on now, had the first never reached it). A completed call settles the claim; anything
   * else leaves it abandoned, for a later redelivery to ask again.
   */
  async #resendAbandoned(call: GuardedCall): Promise<AipActionResult> {
    const { ledger, now, onLedgerError } = this.#options;
    const { result, evidence } = await call.execute();
    if (result.status !== 'completed') return result;
    try {
      await ledger.settleAbandoned(call.scope, now(), result, evidence);
      return result;
    } catch (error) {
      onLedgerError(error, 'store outcome');
      return withFailedWrite(result);
    }
  }

  /** Renews the claim's lease every third of it until stopped. */
  #renewLease(scope: IdempotencyScope, owner: string): { stop(): void } {
    const { ledger, leaseMs, now, onLedgerError } = this.#options;
    const renewal = setInterval(
      () => {
        ledger.renewLease(scope, owner, now() + leaseMs).catch((error: unknown) => onLedgerError(error, 'renew lease'));
      },
      Math.max(1, Math.floor(leaseMs / 3)),
    );
    return { stop: () => clearInterval(renewal) };
  }

  /** settle(), unless an earlier attempt whose answer was lost stored this very result already (its evidence would be written over). */
  async #settleUnlessStored(scope: IdempotencyScope, owner: string, result: AipActionResult, evidence: EvidenceWrite | undefined): Promise<void> {
    const { ledger, now } = this.#options;
    const stored = await ledger.get(scope, now());
    if (stored?.state === 'done' && stored.result?.receipt?.receipt_id === result.receipt?.receipt_id && result.receipt) return;
    await ledger.settle(scope, owner, result, evidence);
  }

  /**
   * Tries a failed write again in the background (250 ms doubling to 5 s) until it succeeds, the
   * guard closes or STORE_RETRY_FOR_MS passes; then stops the renewal. Past MAX_LATE_WRITES, gives up at once.
   */
  #writeLater(what: LateWrite, write: () => Promise<void>, renewal: { stop(): void }): void {
    const { now, onLedgerError, onLateWrite } = this.#options;
    if (this.#lateWrites.size >= MAX_LATE_WRITES) {
      renewal.stop();
      onLateWrite(what, 'given_up');
      return;
    }
    const giveUpAt = now() + STORE_RETRY_FOR_MS;
    const retries = (async () => {
      for (let attempt = 0; !this.#closed && now() < giveUpAt; attempt++) {
        await this.#sleep(Math.min(STORE_RETRY_MAX_MS, STORE_RETRY_MIN_MS * 2 ** Math.min(attempt, 5)));
        if (this.#closed) break;
        try {
          await write();
          onLateWrite(what, 'written');
          return;
        } catch (error) {
          onLedgerError(error, `write ${what} again`);
        }
      }
      onLateWrite(what, 'given_up');
    })().finally(() => {
      renewal.stop();
      this.#lateWrites.delete(retries);
    });
    this.#lateWrites.add(retries);
  }

  /** Removes a claim nothing was sent under, once the ledger answers (its lease is not renewed meanwhile). */
  #releaseLater(scope: IdempotencyScope, owner: string): void {
    const { ledger } = this.#options;
    this.#writeLater('claim release', () => ledger.release(scope, owner), { stop() {} });
  }

  /** Ends every wait for a duplicate in flight, and every late write, at once (the connector is closing); later ones end at once too. */
  close(): void {
    this.#closed = true;
    for (const wake of [...this.#sleepers]) wake();
  }

  /** Resolves once no late write is being tried any more (after close(), at once). */
  async drained(): Promise<void> {
    await Promise.allSettled([...this.#lateWrites]);
  }

  /** Waits a little for a duplicate in flight; returns a failure when the caller's own time or signal ran out. */
  async #wait(call: GuardedCall, attempt: number): Promise<HermesFailure | undefined> {
    const remaining = call.deadline - this.#options.now();
    const outcome = 'the first call with this key is still in flight; its outcome is not known to this caller';
    if (this.#closed) return new HermesFailure('cancelled', `The connector closed while this call waited: ${outcome}`, { effect: 'maybe' });
    if (call.signal?.aborted) return new HermesFailure('cancelled', `Cancelled while waiting: ${outcome}`, { effect: 'maybe' });
    if (remaining <= 0) return new HermesFailure('deadline_exceeded', `The AIP deadline passed while waiting: ${outcome}`, { effect: 'maybe' });
    await this.#sleep(Math.min(remaining, POLL_MIN_MS * 2 ** Math.min(attempt, 4), POLL_MAX_MS));
    return undefined;
  }

  /** Sleeps `ms`, or until close(). */
  #sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.#sleepers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.#sleepers.add(wake);
    });
  }

  #purgeNow(): void {
    const at = this.#options.now();
    if (at - this.#lastPurge < PURGE_INTERVAL_MS) return;
    this.#lastPurge = at;
    this.#options.ledger.purgeExpired(at).catch((error: unknown) => this.#options.onLedgerError(error, 'purge expired keys'));
  }
}

/** SHA-256 of the canonical JSON of the input. */
export function fingerprintOf(input: unknown): string {
  return createHash('sha256').update(canonicalJson(input)).digest('hex');
}

/** The caller's copy of a result whose ledger write failed: the receipt says so (the stored copy does not). */
function withFailedWrite(result: AipActionResult): AipActionResult {
  return result.receipt ? { ...result, receipt: { ...result.receipt, ledger: 'write_failed' } } : result;
}

function replay(record: IdempotencyRecord, actionId: string): AipActionResult {
  const original = record.result as AipActionResult;
  return {
    ...original,
    action_id: actionId,
    receipt: { ...original.receipt, replayed: true, replayed_by: 'connector', original_action_id: record.action_id } as AipActionResult['receipt'],
  };
}

function abandoned(record: IdempotencyRecord): HermesFailure {
  return new HermesFailure(
    'outcome_unknown',
    'The first call with this idempotency key was left in flight by a process that stopped; whether Hermes acted is unknown, and it is not sent again',
    { effect: 'maybe', details: { original_action_id: record.action_id } },
  );
}
