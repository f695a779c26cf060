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

export interface IdempotencyGuardOptions {
  ledger: RunLedger;
  now: () => number;
  /** How long a claim stays alive without renewal before its owner is presumed dead. */
  leaseMs: number;
  /** Storage trouble after the provider call: the result still goes back to the caller, and this is told. */
  onLedgerError: (error: unknown, stage: string) => void;
}

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
  #lastPurge = 0;
  #closed = false;
  /** Wakes the callers waiting for a duplicate in flight, so close() need not wait out their deadlines. */
  readonly #sleepers = new Set<() => void>();

  constructor(options: IdempotencyGuardOptions) {
    this.#options = options;
  }

  async run(call: GuardedCall): Promise<AipActionResult> {
    const { ledger, now, leaseMs } = this.#options;
    const fingerprint = fingerprintOf(call.input);
    this.#purgeNow();
    for (let attempt = 0; ; attempt++) {
      const at = now();
      const claim = await ledger.claim({
        ...call.scope,
        fingerprint,
        action_id: call.actionId,
        owner: this.#owner,
        now: at,
        lease_expires_at: at + leaseMs,
        expires_at: at + IDEMPOTENCY_TTL_MS,
      });
      if (claim.claimed) return this.#execute(call);
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
        await ledger.settleAbandoned(call.scope, at, call.fail(abandoned(record)));
        continue;
      }
      const waited = await this.#wait(call, attempt);
      if (waited) return call.fail(waited);
    }
  }

  async #execute(call: GuardedCall): Promise<AipActionResult> {
    const { ledger, leaseMs, now, onLedgerError } = this.#options;
    const renewal = setInterval(
      () => {
        ledger.renewLease(call.scope, this.#owner, now() + leaseMs).catch((error: unknown) => onLedgerError(error, 'renew lease'));
      },
      Math.max(1, Math.floor(leaseMs / 3)),
    );
    let outcome: GuardedOutcome;
    try {
      outcome = await call.execute();
    } finally {
      clearInterval(renewal);
    }
    const { result, evidence } = outcome;
    // Effects and uncertain outcomes are kept and replayed; an outcome where the provider
    // certainly did nothing frees the key for another try. The evidence goes in the same write.
    // If storing fails, the claim's lease runs out and later replays answer outcome_unknown: still honest.
    try {
      if (result.status === 'completed' || result.error?.details?.uncertain_outcome === true) {
        await ledger.settle(call.scope, this.#owner, result, evidence);
      } else {
        await ledger.release(call.scope, this.#owner, evidence);
      }
    } catch (error) {
      this.#options.onLedgerError(error, 'store outcome');
    }
    return result;
  }

  /** Ends every wait for a duplicate in flight at once (the connector is closing); later waits end at once too. */
  close(): void {
    this.#closed = true;
    for (const wake of [...this.#sleepers]) wake();
  }

  /** Waits a little for a duplicate in flight; returns a failure when the caller's own time or signal ran out. */
  async #wait(call: GuardedCall, attempt: number): Promise<HermesFailure | undefined> {
    const remaining = call.deadline - this.#options.now();
    const outcome = 'the first call with this key is still in flight; its outcome is not known to this caller';
    if (this.#closed) return new HermesFailure('cancelled', `The connector closed while this call waited: ${outcome}`, { effect: 'maybe' });
    if (call.signal?.aborted) return new HermesFailure('cancelled', `Cancelled while waiting: ${outcome}`, { effect: 'maybe' });
    if (remaining <= 0) return new HermesFailure('deadline_exceeded', `The AIP deadline passed while waiting: ${outcome}`, { effect: 'maybe' });
    const pause = Math.min(remaining, POLL_MIN_MS * 2 ** Math.min(attempt, 4), POLL_MAX_MS);
    await new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.#sleepers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, pause);
      this.#sleepers.add(wake);
    });
    return undefined;
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
