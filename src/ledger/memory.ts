import { ConnectorConfigError } from '../config.js';
import type { AipActionResult } from '../types.js';
import { pickEvidence } from './evidence.js';
import { isOpen, isSettled } from './run-status.js';
import type {
  ApprovalImport,
  BridgeJob,
  ClaimRequest,
  ClaimResult,
  GrantUse,
  IdempotencyRecord,
  IdempotencyScope,
  RunEvidence,
  RunEvidencePatch,
  EvidenceWrite,
  RunLedger,
  RunRef,
} from './types.js';

export interface MemoryLedgerOptions {
  /** Run bindings and finished bridge jobs not updated for this long are dropped (default 24 h, the key TTL). */
  retentionMs?: number;
  /** At most this many run bindings are kept; past it the oldest goes first (default 10,000). */
  maxRuns?: number;
}

const DEFAULT_RETENTION_MS = 24 * 60 * 60 * 1000;
const DEFAULT_MAX_RUNS = 10_000;

/**
 * The default ledger: correct within one process, gone when it exits, and bounded so that a
 * long-lived host does not grow without end: evidence older than `retentionMs` is dropped
 * when expired keys are purged, and the oldest binding makes room past `maxRuns`.
 */
export function createMemoryLedger(options: MemoryLedgerOptions = {}): RunLedger {
  const retentionMs = positiveOption(options.retentionMs, DEFAULT_RETENTION_MS, 'retentionMs');
  const maxRuns = positiveOption(options.maxRuns, DEFAULT_MAX_RUNS, 'maxRuns');
  const records = new Map<string, IdempotencyRecord>();
  const grants = new Map<string, GrantUse>();
  /** message_id → expires_at of the message ids claimed. */
  const messages = new Map<string, number>();
  const approvals = new Map<string, ApprovalImport>();
  /** (tenant, action) → binding, in recording order (a re-recorded binding moves to the end). */
  const runs = new Map<string, RunEvidence>();
  /** action_id and run_id → the keys of the bindings that carry it, so lookups never scan. */
  const keysById = new Map<string, Set<string>>();
  const bindingKey = (tenantId: string | null, actionId: string) => JSON.stringify([tenantId, actionId]);
  const index = (id: string, key: string) => keysById.set(id, (keysById.get(id) ?? new Set()).add(key));
  const unindex = (id: string, key: string) => {
    const keys = keysById.get(id);
    keys?.delete(key);
    if (keys?.size === 0) keysById.delete(id);
  };
  const bindingsWith = (id: string): RunEvidence[] => [...(keysById.get(id) ?? [])].map((key) => runs.get(key) as RunEvidence);
  const dropRun = (key: string) => {
    const evidence = runs.get(key);
    if (!evidence) return;
    runs.delete(key);
    unindex(evidence.action_id, key);
    unindex(evidence.run_id, key);
  };
  const jobs = new Map<string, BridgeJob>();
  const jobKey = (sessionId: string, toolUseId: string, tenantId: string | null | undefined) => JSON.stringify([tenantId ?? null, sessionId, toolUseId]);
  const keyOf = (scope: IdempotencyScope) => JSON.stringify([scope.capability_id, scope.idempotency_key]);
  const owned = (scope: IdempotencyScope, owner: string) => {
    const record = records.get(keyOf(scope));
    return record?.state === 'in_flight' && record.lease_owner === owner ? record : undefined;
  };
  const copy = <T>(value: T): T => structuredClone(value);
  const dropStale = (now: number) => {
    for (const [key, evidence] of runs) if (evidence.updated_at <= now - retentionMs) dropRun(key);
    for (const [key, job] of jobs) if (job.state === 'done' && job.updated_at <= now - retentionMs) jobs.delete(key);
    for (const [key, use] of grants) if (use.expires_at <= now) grants.delete(key);
    for (const [id, expiresAt] of messages) if (expiresAt <= now) messages.delete(id);
    for (const [key, record] of approvals) if (record.expires_at <= now) approvals.delete(key);
  };
  const recordRun = (evidence: RunEvidence) => {
    const key = bindingKey(evidence.tenant_id, evidence.action_id);
    dropRun(key);
    runs.set(key, copy(evidence));
    index(evidence.action_id, key);
    index(evidence.run_id, key);
    // Maps iterate in insertion order: the first key is the oldest binding.
    if (runs.size > maxRuns) dropRun(runs.keys().next().value as string);
  };
  const updateRun = (run: RunRef, patch: RunEvidencePatch) => {
    // Most status reads concern runs this ledger never bound: no array built for those.
    if (!keysById.has(run.run_id)) return;
    for (const evidence of bindingsWith(run.run_id)) {
      if (evidence.run_id !== run.run_id || evidence.endpoint_id !== run.endpoint_id || evidence.tenant_id !== run.tenant_id) continue;
      if (!isSettled(evidence)) assignDefined(evidence, patch);
      evidence.updated_at = patch.updated_at;
    }
  };
  const writeEvidence = (write: EvidenceWrite) => ('bind' in write ? recordRun(write.bind) : updateRun(write.update, write.patch));

  return {
    kind: 'memory',
    async claim(request: ClaimRequest): Promise<ClaimResult> {
      const key = keyOf(request);
      const existing = records.get(key);
      if (existing && existing.expires_at > request.now) return { claimed: false, record: copy(existing) };
      records.set(key, {
        capability_id: request.capability_id,
        idempotency_key: request.idempotency_key,
        fingerprint: request.fingerprint,
        action_id: request.action_id,
        state: 'in_flight',
        result: null,
        lease_owner: request.owner,
        lease_expires_at: request.lease_expires_at,
        created_at: request.now,
        expires_at: request.expires_at,
      });
      return { claimed: true };
    },
    async get(scope, now) {
      const record = records.get(keyOf(scope));
      return record && record.expires_at > now ? copy(record) : undefined;
    },
    async renewLease(scope, owner, leaseExpiresAt) {
      const record = owned(scope, owner);
      if (record) record.lease_expires_at = leaseExpiresAt;
      return record !== undefined;
    },
    async settle(scope, owner, result: AipActionResult, evidence) {
      const record = owned(scope, owner);
      if (record) Object.assign(record, { state: 'done', result: copy(result), lease_owner: null, lease_expires_at: null });
      if (evidence) writeEvidence(evidence);
    },
    async release(scope, owner, evidence) {
      if (owned(scope, owner)) records.delete(keyOf(scope));
      if (evidence) writeEvidence(evidence);
    },
    async settleAbandoned(scope, now, result, evidence) {
      if (evidence) writeEvidence(evidence);
      const record = records.get(keyOf(scope));
      if (record?.state !== 'in_flight' || (record.lease_expires_at ?? 0) >= now) return false;
      Object.assign(record, { state: 'done', result: copy(result), lease_owner: null, lease_expires_at: null });
      return true;
    },
    async purgeExpired(now) {
      let purged = 0;
      for (const [key, record] of records) {
        if (record.expires_at <= now) {
          records.delete(key);
          purged++;
        }
      }
      dropStale(now);
      return purged;
    },
    async claimMessage(claim, now) {
      const standing = messages.get(claim.message_id);
      if (standing !== undefined && standing > now) return false;
      messages.set(claim.message_id, claim.expires_at);
      return true;
    },
    async importApproval(record) {
      const key = JSON.stringify([record.tenant_id, record.approval_id]);
      const standing = approvals.get(key) ?? record;
      approvals.set(key, standing);
      return copy(standing);
    },
    async useGrant(use) {
      const key = JSON.stringify([use.tenant_id, use.approval_id]);
      const standing = grants.get(key) ?? use;
      grants.set(key, standing);
      return copy(standing);
    },
    async recordRun(evidence) {
      recordRun(evidence);
    },
    async updateRun(run, patch) {
      updateRun(run, patch);
    },
    async evidence(actionIdOrRunId, tenantId) {
      const candidates = bindingsWith(actionIdOrRunId).filter((evidence) => tenantId === undefined || evidence.tenant_id === tenantId);
      const found = pickEvidence(actionIdOrRunId, candidates);
      return found ? copy(found) : null;
    },
    async openRuns() {
      return [...runs.values()].filter(isOpen).map(copy);
    },
    async createJob(job) {
      const key = jobKey(job.session_id, job.tool_use_id, job.tenant_id);
      if (jobs.has(key)) return false;
      jobs.set(key, { ...copy(job), tenant_id: job.tenant_id ?? null });
      return true;
    },
    async updateJob(sessionId, toolUseId, patch, tenantId) {
      const job = jobs.get(jobKey(sessionId, toolUseId, tenantId));
      if (job) assignDefined(job, patch);
    },
    async job(sessionId, toolUseId, tenantId) {
      const job = jobs.get(jobKey(sessionId, toolUseId, tenantId));
      return job ? copy(job) : null;
    },
    async unfinishedJobs(tenantId) {
      return [...jobs.values()]
        .filter((job) => job.state !== 'done' && job.tenant_id === (tenantId ?? null))
        .sort((a, b) => a.created_at - b.created_at)
        .map(copy);
    },
    async claimJob(sessionId, toolUseId, owner, now, leaseExpiresAt, tenantId) {
      const job = jobs.get(jobKey(sessionId, toolUseId, tenantId));
      if (!job || job.state === 'done') return null;
      const free = job.lease_owner === null || job.lease_owner === owner || job.lease_expires_at === null || job.lease_expires_at <= now;
      if (!free) return null;
      Object.assign(job, { lease_owner: owner, lease_expires_at: leaseExpiresAt });
      return copy(job);
    },
    async renewJobLease(sessionId, toolUseId, owner, leaseExpiresAt, tenantId) {
      const job = jobs.get(jobKey(sessionId, toolUseId, tenantId));
      if (job?.lease_owner !== owner) return false;
      job.lease_expires_at = leaseExpiresAt;
      return true;
    },
    async close() {},
  };
}

/** Like Object.assign, but a field given as undefined leaves the stored value alone (as the SQL ledgers do). */
function assignDefined<T extends object>(target: T, patch: Partial<T>): void {
  for (const [field, value] of Object.entries(patch)) {
    if (value !== undefined) (target as Record<string, unknown>)[field] = value;
  }
}

function positiveOption(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0)
    throw new ConnectorConfigError('invalid_ledger', `createMemoryLedger: \`${name}\` must be a positive integer`);
  return value;
}
