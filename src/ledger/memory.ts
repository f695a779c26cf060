import type { AipActionResult } from '../types.js';
import type { BridgeJob, ClaimRequest, ClaimResult, IdempotencyRecord, IdempotencyScope, RunEvidence, RunEvidencePatch, RunLedger } from './types.js';
import { isOpen } from './run-status.js';

/** The default ledger: correct within one process, gone when it exits. */
export function createMemoryLedger(): RunLedger {
  const records = new Map<string, IdempotencyRecord>();
  const runs = new Map<string, RunEvidence>();
  /** run_id → the action ids bound to it, so status and event results find their binding without a scan. */
  const actionsByRun = new Map<string, Set<string>>();
  const boundTo = (runId: string): RunEvidence[] => [...(actionsByRun.get(runId) ?? [])].map((actionId) => runs.get(actionId) as RunEvidence);
  const jobs = new Map<string, BridgeJob>();
  const jobKey = (sessionId: string, toolUseId: string) => JSON.stringify([sessionId, toolUseId]);
  const keyOf = (scope: IdempotencyScope) => JSON.stringify([scope.capability_id, scope.idempotency_key]);
  const owned = (scope: IdempotencyScope, owner: string) => {
    const record = records.get(keyOf(scope));
    return record?.state === 'in_flight' && record.lease_owner === owner ? record : undefined;
  };
  const copy = <T>(value: T): T => structuredClone(value);

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
    async settle(scope, owner, result: AipActionResult) {
      const record = owned(scope, owner);
      if (!record) return;
      Object.assign(record, { state: 'done', result: copy(result), lease_owner: null, lease_expires_at: null });
    },
    async release(scope, owner) {
      if (owned(scope, owner)) records.delete(keyOf(scope));
    },
    async settleAbandoned(scope, now, result) {
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
      return purged;
    },
    async recordRun(evidence) {
      const previous = runs.get(evidence.action_id);
      if (previous) actionsByRun.get(previous.run_id)?.delete(evidence.action_id);
      runs.set(evidence.action_id, copy(evidence));
      const bound = actionsByRun.get(evidence.run_id) ?? new Set<string>();
      actionsByRun.set(evidence.run_id, bound.add(evidence.action_id));
    },
    async updateRun(runId, endpointId, patch: RunEvidencePatch) {
      for (const evidence of boundTo(runId)) {
        if (evidence.endpoint_id === endpointId) assignDefined(evidence, patch);
      }
    },
    async evidence(actionIdOrRunId) {
      const found = runs.get(actionIdOrRunId) ?? boundTo(actionIdOrRunId)[0];
      return found ? copy(found) : null;
    },
    async openRuns() {
      return [...runs.values()].filter(isOpen).map(copy);
    },
    async createJob(job) {
      const key = jobKey(job.session_id, job.tool_use_id);
      if (jobs.has(key)) return false;
      jobs.set(key, copy(job));
      return true;
    },
    async updateJob(sessionId, toolUseId, patch) {
      const job = jobs.get(jobKey(sessionId, toolUseId));
      if (job) assignDefined(job, patch);
    },
    async job(sessionId, toolUseId) {
      const job = jobs.get(jobKey(sessionId, toolUseId));
      return job ? copy(job) : null;
    },
    async unfinishedJobs() {
      return [...jobs.values()]
        .filter((job) => job.state !== 'done')
        .sort((a, b) => a.created_at - b.created_at)
        .map(copy);
    },
    async claimJob(sessionId, toolUseId, owner, now, leaseExpiresAt) {
      const job = jobs.get(jobKey(sessionId, toolUseId));
      if (!job || job.state === 'done') return null;
      const free = job.lease_owner === null || job.lease_owner === owner || job.lease_expires_at === null || job.lease_expires_at <= now;
      if (!free) return null;
      Object.assign(job, { lease_owner: owner, lease_expires_at: leaseExpiresAt });
      return copy(job);
    },
    async renewJobLease(sessionId, toolUseId, owner, leaseExpiresAt) {
      const job = jobs.get(jobKey(sessionId, toolUseId));
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
