import type { AipActionResult } from '../types.js';
import { TERMINAL_STATUSES } from './run-status.js';
import type { BridgeJob, ClaimRequest, IdempotencyRecord, IdempotencyScope, RunEvidence, RunLedger } from './types.js';

export type SqlRow = Record<string, unknown>;

/** What a SQL backend provides: statements with `?` placeholders, and its own way to migrate safely. */
export interface SqlExecutor {
  migrate(): Promise<void>;
  all(sql: string, params: unknown[]): Promise<SqlRow[]>;
  /** Runs a statement; resolves with the number of rows it changed. */
  run(sql: string, params: unknown[]): Promise<number>;
  close(): Promise<void>;
}

const RECORD_COLUMNS = 'capability_id, idempotency_key, fingerprint, action_id, state, result, lease_owner, lease_expires_at, created_at, expires_at';
const RUN_COLUMNS =
  'action_id, capability_id, endpoint_id, tenant_id, run_id, session_id, credential_revision, created_at, updated_at, last_status, terminal_event, evidence_lost';
const JOB_COLUMNS =
  'session_id, tool_use_id, tool_name, tool_input, action_id, idempotency_key, run_id, state, kickoff, kickoff_event_id, final_status, final_event_id, created_at, updated_at, lease_owner, lease_expires_at';
const JOB = 'session_id = ? AND tool_use_id = ?';
const SCOPE = 'capability_id = ? AND idempotency_key = ?';
const TERMINAL_LIST = [...TERMINAL_STATUSES].map((status) => `'${status}'`).join(', ');

/**
 * A RunLedger over SQL shared by SQLite and PostgreSQL. Every method is one statement, so
 * each is atomic without a transaction; the claim is an upsert that only replaces an
 * expired record, which makes concurrent claims from several replicas safe.
 */
export function createSqlLedger(kind: string, executor: SqlExecutor): RunLedger {
  let ready: Promise<void> | undefined;
  const db = async () => {
    ready ??= executor.migrate();
    await ready;
    return executor;
  };
  const scopeParams = (scope: IdempotencyScope) => [scope.capability_id, scope.idempotency_key];

  return {
    kind,
    async claim(request: ClaimRequest) {
      const sql = await db();
      const changed = await sql.run(
        `INSERT INTO idempotency_records (${RECORD_COLUMNS}) VALUES (?, ?, ?, ?, 'in_flight', NULL, ?, ?, ?, ?)
         ON CONFLICT (capability_id, idempotency_key) DO UPDATE SET
           fingerprint = excluded.fingerprint, action_id = excluded.action_id, state = excluded.state, result = NULL,
           lease_owner = excluded.lease_owner, lease_expires_at = excluded.lease_expires_at,
           created_at = excluded.created_at, expires_at = excluded.expires_at
         WHERE idempotency_records.expires_at <= excluded.created_at`,
        [...scopeParams(request), request.fingerprint, request.action_id, request.owner, request.lease_expires_at, request.now, request.expires_at],
      );
      if (changed > 0) return { claimed: true };
      const record = await this.get(request, request.now);
      // Released between the two statements: claim again.
      return record ? { claimed: false, record } : this.claim(request);
    },
    async get(scope, now) {
      const rows = await (await db()).all(`SELECT ${RECORD_COLUMNS} FROM idempotency_records WHERE ${SCOPE} AND expires_at > ?`, [...scopeParams(scope), now]);
      return rows[0] ? toRecord(rows[0]) : undefined;
    },
    async renewLease(scope, owner, leaseExpiresAt) {
      const changed = await (await db()).run(
        `UPDATE idempotency_records SET lease_expires_at = ? WHERE ${SCOPE} AND state = 'in_flight' AND lease_owner = ?`,
        [leaseExpiresAt, ...scopeParams(scope), owner],
      );
      return changed > 0;
    },
    async settle(scope, owner, result: AipActionResult) {
      await (await db()).run(
        `UPDATE idempotency_records SET state = 'done', result = ?, lease_owner = NULL, lease_expires_at = NULL
         WHERE ${SCOPE} AND state = 'in_flight' AND lease_owner = ?`,
        [JSON.stringify(result), ...scopeParams(scope), owner],
      );
    },
    async release(scope, owner) {
      await (await db()).run(`DELETE FROM idempotency_records WHERE ${SCOPE} AND state = 'in_flight' AND lease_owner = ?`, [...scopeParams(scope), owner]);
    },
    async settleAbandoned(scope, now, result) {
      const changed = await (await db()).run(
        `UPDATE idempotency_records SET state = 'done', result = ?, lease_owner = NULL, lease_expires_at = NULL
         WHERE ${SCOPE} AND state = 'in_flight' AND lease_expires_at < ?`,
        [JSON.stringify(result), ...scopeParams(scope), now],
      );
      return changed > 0;
    },
    async purgeExpired(now) {
      return (await db()).run('DELETE FROM idempotency_records WHERE expires_at <= ?', [now]);
    },
    async recordRun(evidence) {
      await (await db()).run(
        `INSERT INTO run_bindings (${RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (action_id) DO UPDATE SET run_id = excluded.run_id, updated_at = excluded.updated_at, last_status = excluded.last_status`,
        [
          evidence.action_id,
          evidence.capability_id,
          evidence.endpoint_id,
          evidence.tenant_id,
          evidence.run_id,
          evidence.session_id,
          evidence.credential_revision,
          evidence.created_at,
          evidence.updated_at,
          evidence.last_status,
          evidence.terminal_event,
          evidence.evidence_lost ? 1 : 0,
        ],
      );
    },
    async updateRun(runId, endpointId, patch) {
      await (await db()).run(
        `UPDATE run_bindings SET updated_at = ?, last_status = COALESCE(?, last_status), terminal_event = COALESCE(?, terminal_event),
           evidence_lost = COALESCE(?, evidence_lost)
         WHERE run_id = ? AND endpoint_id = ?`,
        [patch.updated_at, patch.last_status ?? null, patch.terminal_event ?? null, patch.evidence_lost === undefined ? null : Number(patch.evidence_lost), runId, endpointId],
      );
    },
    async evidence(actionIdOrRunId) {
      const rows = await (await db()).all(
        `SELECT ${RUN_COLUMNS} FROM run_bindings WHERE action_id = ? OR run_id = ? ORDER BY CASE WHEN action_id = ? THEN 0 ELSE 1 END, created_at DESC LIMIT 1`,
        [actionIdOrRunId, actionIdOrRunId, actionIdOrRunId],
      );
      return rows[0] ? toEvidence(rows[0]) : null;
    },
    async openRuns() {
      const rows = await (await db()).all(
        `SELECT ${RUN_COLUMNS} FROM run_bindings WHERE evidence_lost = 0 AND last_status NOT IN (${TERMINAL_LIST}) ORDER BY created_at`,
        [],
      );
      return rows.map(toEvidence);
    },
    async createJob(job) {
      const changed = await (await db()).run(
        `INSERT INTO herm_jobs (${JOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, tool_use_id) DO NOTHING`,
        [
          job.session_id,
          job.tool_use_id,
          job.tool_name,
          JSON.stringify(job.tool_input),
          job.action_id,
          job.idempotency_key,
          job.run_id,
          job.state,
          job.kickoff,
          job.kickoff_event_id,
          job.final_status,
          job.final_event_id,
          job.created_at,
          job.updated_at,
          job.lease_owner,
          job.lease_expires_at,
        ],
      );
      return changed > 0;
    },
    async updateJob(sessionId, toolUseId, patch) {
      const fields = (['run_id', 'state', 'kickoff', 'kickoff_event_id', 'final_status', 'final_event_id'] as const).filter((field) => patch[field] !== undefined);
      await (await db()).run(
        `UPDATE herm_jobs SET updated_at = ?${fields.map((field) => `, ${field} = ?`).join('')} WHERE ${JOB}`,
        [patch.updated_at, ...fields.map((field) => patch[field]), sessionId, toolUseId],
      );
    },
    async job(sessionId, toolUseId) {
      const rows = await (await db()).all(`SELECT ${JOB_COLUMNS} FROM herm_jobs WHERE ${JOB}`, [sessionId, toolUseId]);
      return rows[0] ? toJob(rows[0]) : null;
    },
    async unfinishedJobs() {
      const rows = await (await db()).all(`SELECT ${JOB_COLUMNS} FROM herm_jobs WHERE state <> 'done' ORDER BY created_at`, []);
      return rows.map(toJob);
    },
    async claimJob(sessionId, toolUseId, owner, now, leaseExpiresAt) {
      const changed = await (await db()).run(
        `UPDATE herm_jobs SET lease_owner = ?, lease_expires_at = ?
         WHERE ${JOB} AND state <> 'done' AND (lease_owner IS NULL OR lease_owner = ? OR lease_expires_at IS NULL OR lease_expires_at <= ?)`,
        [owner, leaseExpiresAt, sessionId, toolUseId, owner, now],
      );
      if (changed === 0) return null;
      // The row is this owner's now: reading it back cannot race another claim.
      return this.job(sessionId, toolUseId);
    },
    async renewJobLease(sessionId, toolUseId, owner, leaseExpiresAt) {
      return (await (await db()).run(`UPDATE herm_jobs SET lease_expires_at = ? WHERE ${JOB} AND lease_owner = ?`, [leaseExpiresAt, sessionId, toolUseId, owner])) > 0;
    },
    async close() {
      await ready?.catch(() => undefined);
      await executor.close();
    },
  };
}

// PostgreSQL returns BIGINT columns as strings; both backends go through Number here.
const num = (value: unknown): number => Number(value);
const numOrNull = (value: unknown): number | null => (value === null || value === undefined ? null : Number(value));
const strOrNull = (value: unknown): string | null => (value === null || value === undefined ? null : String(value));

function toRecord(row: SqlRow): IdempotencyRecord {
  return {
    capability_id: String(row.capability_id),
    idempotency_key: String(row.idempotency_key),
    fingerprint: String(row.fingerprint),
    action_id: String(row.action_id),
    state: row.state === 'done' ? 'done' : 'in_flight',
    result: row.result === null || row.result === undefined ? null : (JSON.parse(String(row.result)) as AipActionResult),
    lease_owner: strOrNull(row.lease_owner),
    lease_expires_at: numOrNull(row.lease_expires_at),
    created_at: num(row.created_at),
    expires_at: num(row.expires_at),
  };
}

function toEvidence(row: SqlRow): RunEvidence {
  return {
    action_id: String(row.action_id),
    capability_id: String(row.capability_id),
    endpoint_id: String(row.endpoint_id),
    tenant_id: strOrNull(row.tenant_id),
    run_id: String(row.run_id),
    session_id: String(row.session_id),
    credential_revision: strOrNull(row.credential_revision),
    created_at: num(row.created_at),
    updated_at: num(row.updated_at),
    last_status: String(row.last_status),
    terminal_event: strOrNull(row.terminal_event),
    evidence_lost: num(row.evidence_lost) !== 0,
  };
}

function toJob(row: SqlRow): BridgeJob {
  return {
    session_id: String(row.session_id),
    tool_use_id: String(row.tool_use_id),
    tool_name: String(row.tool_name),
    tool_input: JSON.parse(String(row.tool_input)) as Record<string, unknown>,
    action_id: String(row.action_id),
    idempotency_key: String(row.idempotency_key),
    run_id: strOrNull(row.run_id),
    state: String(row.state) as BridgeJob['state'],
    kickoff: String(row.kickoff) as BridgeJob['kickoff'],
    kickoff_event_id: strOrNull(row.kickoff_event_id),
    final_status: strOrNull(row.final_status) as BridgeJob['final_status'],
    final_event_id: strOrNull(row.final_event_id),
    created_at: num(row.created_at),
    updated_at: num(row.updated_at),
    lease_owner: strOrNull(row.lease_owner),
    lease_expires_at: numOrNull(row.lease_expires_at),
  };
}
