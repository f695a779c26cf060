import type { AipActionResult } from '../contract/aip.js';

/** What the connector keeps about a run it started: the evidence Hermes itself forgets. */
export interface RunEvidence {
  action_id: string;
  capability_id: string;
  endpoint_id: string;
  tenant_id: string | null;
  run_id: string;
  session_id: string;
  /** A short hash of the endpoint credential in force when the run started; never the key. */
  credential_revision: string | null;
  /** Epoch ms. */
  created_at: number;
  updated_at: number;
  last_status: string;
  terminal_event: string | null;
  /** Hermes no longer knows the run (retention expiry or restart): what happened is not known from the provider. */
  evidence_lost: boolean;
  /**
   * How the run was learned: `start_answer`, Hermes' answer to the start; `provider_replay`, Hermes'
   * answer from its own idempotency record to the start sent again (its first answer was lost, or
   * another process started it). Absent on bindings recorded before the connector kept it.
   */
  learned_from?: 'start_answer' | 'provider_replay';
  /** When Hermes marked the run `interrupted` (epoch ms, its record's `updated_at`): a restart or shutdown before it settled. */
  interrupted_at?: number;
}

/** The Herm bridge's record of one custom tool call turned into a Hermes run. */
export interface BridgeJob {
  /**
   * The verified tenant of the bridge that made the job (null or absent: none). Jobs are per tenant
   * like bindings: two tenants' Herm sessions may use the same session and tool-use ids.
   */
  tenant_id?: string | null;
  session_id: string;
  tool_use_id: string;
  tool_name: string;
  /** The tool input as received: replaying the start after a restart needs the same input. */
  tool_input: Record<string, unknown>;
  action_id: string;
  idempotency_key: string;
  run_id: string | null;
  /** starting → running → done; a job not `done` is resumed by recover(). */
  state: 'starting' | 'running' | 'done';
  /** What became of the `running` kickoff result (`rejected`: Herm refused it with a 4xx other than 410 and 429). */
  kickoff: 'pending' | 'accepted' | 'expired' | 'rejected' | 'unknown' | 'skipped';
  kickoff_event_id: string | null;
  /** What Herm holds as the final result; null on a `done` job when Herm refused it for good (a 4xx but 401, 403, 408, 429). */
  final_status: 'completed' | 'failed' | null;
  final_event_id: string | null;
  created_at: number;
  updated_at: number;
  /** The bridge driving the job. Another bridge's recover() takes the job only once the lease has expired. */
  lease_owner: string | null;
  /** Epoch ms after which the owner is presumed gone; renewed while it drives the job. */
  lease_expires_at: number | null;
}

export type BridgeJobPatch = Partial<Pick<BridgeJob, 'run_id' | 'state' | 'kickoff' | 'kickoff_event_id' | 'final_status' | 'final_event_id'>> & {
  updated_at: number;
};

export type RunEvidencePatch = Partial<Pick<RunEvidence, 'last_status' | 'terminal_event' | 'evidence_lost' | 'interrupted_at'>> & { updated_at: number };

/**
 * A run as one tenant sees it. Bindings belong to the verified tenant that made them (null on
 * an endpoint used without one), exactly like idempotency keys: callers choose action ids, so
 * two tenants may use the same one.
 */
export interface RunRef {
  run_id: string;
  endpoint_id: string;
  tenant_id: string | null;
}

/** One use of an AIP approval grant: a grant approves one action (its replays excepted). */
export interface GrantUse extends IdempotencyScope {
  tenant_id: string | null;
  approval_id: string;
  action_id: string;
  used_at: number;
  /** The grant's own expiry: after it the grant is refused anyway, so its use record may go. */
  expires_at: number;
}

/**
 * What a finished call leaves about its run besides its idempotency record: a new binding
 * (`run_start`), or what a later result says about a bound run. Stored in the same
 * transaction as the record, so a start costs the ledger one write after the provider call.
 */
export type EvidenceWrite = { bind: RunEvidence } | { update: RunRef; patch: RunEvidencePatch };

/** An idempotency scope: the capability and the caller's key. */
export interface IdempotencyScope {
  capability_id: string;
  idempotency_key: string;
}

/**
 * A signed message id an AIP connector host accepted, kept until its replay window closes
 * (the reference gateway's replay store: `message_id` + expiry, shared by every replica).
 */
export interface MessageClaim {
  message_id: string;
  /** Epoch ms from which the id may be claimed again (its sent_at + the replay window). */
  expires_at: number;
}

/**
 * An approval record an AIP connector host imported from a route's `approval_authorization`:
 * the first record under an approval id stands, and a different one under the same id is a conflict.
 */
export interface ApprovalImport {
  tenant_id: string | null;
  approval_id: string;
  /** sha256 of the record's canonical JSON: two records are the same record when their digests are equal. */
  digest: string;
  imported_at: number;
  /** After this the record may be forgotten (the approval it authorises has long expired). */
  expires_at: number;
}

export interface IdempotencyRecord extends IdempotencyScope {
  fingerprint: string;
  action_id: string;
  state: 'in_flight' | 'done';
  /** The stored result, once settled. */
  result: AipActionResult | null;
  lease_owner: string | null;
  /** Epoch ms after which an in-flight claim's owner is presumed dead. */
  lease_expires_at: number | null;
  created_at: number;
  expires_at: number;
}

export interface ClaimRequest extends IdempotencyScope {
  fingerprint: string;
  action_id: string;
  owner: string;
  now: number;
  lease_expires_at: number;
  expires_at: number;
}

/** Either this caller now owns the key, or someone else's record stands. */
export type ClaimResult = { claimed: true } | { claimed: false; record: IdempotencyRecord };

/**
 * Durable storage behind the connector's idempotency and run evidence. Every method is
 * atomic on its own; the protocol that uses them lives in idempotency.ts.
 */
export interface RunLedger {
  readonly kind: string;
  /** Inserts an in-flight claim unless a live record exists (an expired one is replaced). */
  claim(request: ClaimRequest): Promise<ClaimResult>;
  get(scope: IdempotencyScope, now: number): Promise<IdempotencyRecord | undefined>;
  /** Extends the owner's lease; false when the claim is no longer the owner's. */
  renewLease(scope: IdempotencyScope, owner: string, leaseExpiresAt: number): Promise<boolean>;
  /**
   * Stores the outcome of the owner's claim and, in the same transaction, the call's evidence
   * (written whether or not the claim is still the owner's: a run Hermes started is a fact).
   */
  settle(scope: IdempotencyScope, owner: string, result: AipActionResult, evidence?: EvidenceWrite): Promise<void>;
  /**
   * Drops the owner's claim (the provider certainly did nothing, so the key may be used again)
   * and, in the same transaction, writes the call's evidence (a 404 learns the run is gone).
   */
  release(scope: IdempotencyScope, owner: string, evidence?: EvidenceWrite): Promise<void>;
  /**
   * Settles a claim whose owner's lease expired before `now` with `result`; false when it was not
   * such a claim. The evidence, when given (a call sent again learned its run), is written in the
   * same transaction, whether or not the claim was still abandoned.
   */
  settleAbandoned(scope: IdempotencyScope, now: number, result: AipActionResult, evidence?: EvidenceWrite): Promise<boolean>;
  /** Deletes idempotency records, grant uses, message claims and imported approvals whose time-to-live passed; returns how many idempotency records. */
  purgeExpired(now: number): Promise<number>;
  /**
   * Records a message id unless a live claim of it exists (an expired one is replaced); true
   * when this call claimed it. Atomic across ledgers over one store: of concurrent claims of
   * one id, exactly one is true.
   */
  claimMessage(claim: MessageClaim, now: number): Promise<boolean>;
  /** Imports an approval record unless one stands under its (tenant, approval id); returns the one that stands. */
  importApproval(record: ApprovalImport): Promise<ApprovalImport>;
  /**
   * Records the grant's use by this (capability, key) unless another action used it already;
   * returns the use that stands, so the caller can tell whether it is its own.
   */
  useGrant(use: GrantUse): Promise<GrantUse>;

  /** Binds (tenant, action) to a run; recording the same pair again replaces its binding. */
  recordRun(evidence: RunEvidence): Promise<void>;
  /**
   * Updates that tenant's bindings of the run on that endpoint. A binding that recorded a
   * terminal outcome keeps it: an older read landing late changes only `updated_at`.
   */
  updateRun(run: RunRef, patch: RunEvidencePatch): Promise<void>;
  /**
   * The binding of an action id (else the newest binding of a run id). With `tenantId` (null:
   * no tenant) only that tenant's bindings are searched; without it, every tenant's, and an id
   * bound by more than one tenant rejects with AmbiguousEvidenceError rather than guess.
   */
  evidence(actionIdOrRunId: string, tenantId?: string | null): Promise<RunEvidence | null>;
  /** Bindings whose run has not reached a terminal state and whose evidence is not lost. */
  openRuns(): Promise<RunEvidence[]>;

  /**
   * Inserts a job unless its tenant has one for (session, tool_use_id); returns whether it was new.
   * Every job method works within one tenant: `tenantId` (and the job's `tenant_id`) null or absent means no tenant.
   */
  createJob(job: BridgeJob): Promise<boolean>;
  updateJob(sessionId: string, toolUseId: string, patch: BridgeJobPatch, tenantId?: string | null): Promise<void>;
  job(sessionId: string, toolUseId: string, tenantId?: string | null): Promise<BridgeJob | null>;
  /** The tenant's jobs whose final result was not accepted yet, oldest first. */
  unfinishedJobs(tenantId?: string | null): Promise<BridgeJob[]>;
  /**
   * Takes an unfinished job for `owner` when its lease is free, expired at `now`, or already
   * the owner's; returns the job as stored, or null when it is done or held by another owner.
   */
  claimJob(sessionId: string, toolUseId: string, owner: string, now: number, leaseExpiresAt: number, tenantId?: string | null): Promise<BridgeJob | null>;
  /** Extends the owner's lease on a job; false when the job is no longer this owner's. */
  renewJobLease(sessionId: string, toolUseId: string, owner: string, leaseExpiresAt: number, tenantId?: string | null): Promise<boolean>;
  close(): Promise<void>;
}

type LedgerMethod = { [K in keyof RunLedger]: RunLedger[K] extends (...args: never[]) => Promise<unknown> ? K : never }[keyof RunLedger];

/** Every RunLedger method: what makes an object a ledger (the `satisfies` check and a test keep the list complete). */
export const LEDGER_METHODS = [
  'claim',
  'get',
  'renewLease',
  'settle',
  'release',
  'settleAbandoned',
  'purgeExpired',
  'claimMessage',
  'importApproval',
  'useGrant',
  'recordRun',
  'updateRun',
  'evidence',
  'openRuns',
  'createJob',
  'updateJob',
  'job',
  'unfinishedJobs',
  'claimJob',
  'renewJobLease',
  'close',
] as const satisfies readonly LedgerMethod[];
