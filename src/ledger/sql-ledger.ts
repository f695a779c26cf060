import type { AipActionResult } from '../types.js';
import { pickEvidence } from './evidence.js';
import { tenantScope } from './migrations.js';
import { TERMINAL_STATUSES } from '../contract/hermes-vocabulary.js';
import { type CommitBatch, GroupCommit, type GroupCommitOptions, type SqlStatement } from './group-commit.js';
import { JOURNAL_STORE, type JournalKeeper } from '../journal/types.js';
import type { JournalTail } from './journal-tail.js';
import { createSqlJournal } from './sql-journal.js';
import { createSqlOutbox } from './sql-outbox.js';
import { DELIVERY_STORE, type DeliveryStore } from '../outbox/types.js';
import { numOrNull, strOrNull } from './sql-values.js';
import type {
  ApprovalImport,
  BridgeJob,
  ClaimRequest,
  EvidenceWrite,
  GrantUse,
  IdempotencyRecord,
  IdempotencyScope,
  RunEvidence,
  RunEvidencePatch,
  RunLedger,
  RunRef,
} from './types.js';

export type SqlRow = Record<string, unknown>;

/** What a SQL backend provides: statements with `?` placeholders, and its own way to migrate safely. */
export interface SqlExecutor {
  migrate(): Promise<void>;
  all(sql: string, params: unknown[]): Promise<SqlRow[]>;
  /** Every write goes through here, batched by group commit. */
  commit: CommitBatch;
  /** How the backend's batches are best sized. */
  groupCommit: GroupCommitOptions;
  /** How readers of a run journal hear of its changes. */
  tail: JournalTail;
  close(): Promise<void>;
}

const RECORD_COLUMNS = 'capability_id, idempotency_key, fingerprint, action_id, state, result, lease_owner, lease_expires_at, created_at, expires_at';
const RUN_COLUMNS =
  'action_id, capability_id, endpoint_id, tenant_id, run_id, session_id, credential_revision, created_at, updated_at, last_status, terminal_event, evidence_lost, learned_from, interrupted_at';
const JOB_COLUMNS =
  'tenant_id, session_id, tool_use_id, tool_name, tool_input, action_id, idempotency_key, run_id, state, kickoff, kickoff_event_id, final_status, final_event_id, created_at, updated_at, lease_owner, lease_expires_at';
const JOB = 'tenant_scope = ? AND session_id = ? AND tool_use_id = ?';
const jobParams = (sessionId: string, toolUseId: string, tenantId: string | null | undefined) => [tenantScope(tenantId ?? null), sessionId, toolUseId];
const SCOPE = 'capability_id = ? AND idempotency_key = ?';
const IMPORT_COLUMNS = 'tenant_id, approval_id, digest, imported_at, expires_at';
const GRANT_COLUMNS = 'tenant_id, approval_id, capability_id, idempotency_key, action_id, used_at, expires_at';
const TERMINAL_LIST = [...TERMINAL_STATUSES].map((status) => `'${status}'`).join(', ');
/** isSettled() in SQL, over the row as it was before the UPDATE. */
const SETTLED = `(terminal_event IS NOT NULL OR last_status IN (${TERMINAL_LIST}))`;
const unlessSettled = (column: string) => `${column} = CASE WHEN ${SETTLED} THEN ${column} ELSE COALESCE(?, ${column}) END`;

/**
 * A RunLedger over SQL shared by SQLite and PostgreSQL. Every write is one statement, or (an
 * outcome with its evidence) one unit committed atomically; concurrent writes share commits
 * (group-commit.ts). A claim inserts the key, or replaces an expired record with an UPDATE
 * that re-checks the expiry, which makes concurrent claims from several replicas safe.
 */
export function createSqlLedger(kind: string, executor: SqlExecutor): RunLedger {
  const setUp = retryingSetUp(() => executor.migrate());
  const writes = new GroupCommit(executor.commit, executor.groupCommit);
  const statements = {
    all: (sql: string, params: unknown[]) => executor.all(sql, params),
    /** Runs one write; resolves with the number of rows it changed. */
    run: async (sql: string, params: unknown[]) => ((await writes.write([{ sql, params }])) as [number])[0],
    /** Runs the statements atomically. */
    runTogether: (unit: SqlStatement[]) => writes.write(unit),
  };
  const db = async () => {
    await setUp.ready();
    return statements;
  };
  const scopeParams = (scope: IdempotencyScope) => [scope.capability_id, scope.idempotency_key];

  const ledger: RunLedger & JournalKeeper & { [DELIVERY_STORE]: DeliveryStore } = {
    kind,
    // Not a RunLedger method (a custom ledger need not keep journals): the connector looks for it when the journal is on.
    [JOURNAL_STORE]: createSqlJournal(db, executor.tail),
    [DELIVERY_STORE]: createSqlOutbox(db),
    async claim(request: ClaimRequest) {
      const sql = await db();
      // DO NOTHING, not DO UPDATE: a key already in use (a replay, a duplicate waiting for the
      // first) is read without locking its row, which on PostgreSQL would cost a WAL flush.
      const inserted = await sql.run(
        `INSERT INTO idempotency_records (${RECORD_COLUMNS}) VALUES (?, ?, ?, ?, 'in_flight', NULL, ?, ?, ?, ?)
         ON CONFLICT (capability_id, idempotency_key) DO NOTHING`,
        [...scopeParams(request), request.fingerprint, request.action_id, request.owner, request.lease_expires_at, request.now, request.expires_at],
      );
      if (inserted > 0) return { claimed: true };
      const record = await this.get(request, request.now);
      if (record) return { claimed: false, record };
      // Expired (or released since the insert): replace it, unless another claim just did.
      const replaced = await sql.run(
        `UPDATE idempotency_records SET fingerprint = ?, action_id = ?, state = 'in_flight', result = NULL, lease_owner = ?,
           lease_expires_at = ?, created_at = ?, expires_at = ?
         WHERE ${SCOPE} AND expires_at <= ?`,
        [
          request.fingerprint,
          request.action_id,
          request.owner,
          request.lease_expires_at,
          request.now,
          request.expires_at,
          ...scopeParams(request),
          request.now,
        ],
      );
      return replaced > 0 ? { claimed: true } : this.claim(request);
    },
    async get(scope, now) {
      const rows = await (await db()).all(`SELECT ${RECORD_COLUMNS} FROM idempotency_records WHERE ${SCOPE} AND expires_at > ?`, [...scopeParams(scope), now]);
      return rows[0] ? toRecord(rows[0]) : undefined;
    },
    async renewLease(scope, owner, leaseExpiresAt) {
      const changed = await (await db()).run(`UPDATE idempotency_records SET lease_expires_at = ? WHERE ${SCOPE} AND state = 'in_flight' AND lease_owner = ?`, [
        leaseExpiresAt,
        ...scopeParams(scope),
        owner,
      ]);
      return changed > 0;
    },
    async settle(scope, owner, result: AipActionResult, evidence) {
      const settle = {
        sql: `UPDATE idempotency_records SET state = 'done', result = ?, lease_owner = NULL, lease_expires_at = NULL
         WHERE ${SCOPE} AND state = 'in_flight' AND lease_owner = ?`,
        params: [JSON.stringify(result), ...scopeParams(scope), owner],
      };
      await (await db()).runTogether(withEvidence(settle, evidence));
    },
    async release(scope, owner, evidence) {
      const release = {
        sql: `DELETE FROM idempotency_records WHERE ${SCOPE} AND state = 'in_flight' AND lease_owner = ?`,
        params: [...scopeParams(scope), owner],
      };
      await (await db()).runTogether(withEvidence(release, evidence));
    },
    async settleAbandoned(scope, now, result, evidence) {
      const settle = {
        sql: `UPDATE idempotency_records SET state = 'done', result = ?, lease_owner = NULL, lease_expires_at = NULL
         WHERE ${SCOPE} AND state = 'in_flight' AND lease_expires_at < ?`,
        params: [JSON.stringify(result), ...scopeParams(scope), now],
      };
      const [changed] = (await (await db()).runTogether(withEvidence(settle, evidence))) as [number];
      return changed > 0;
    },
    async purgeExpired(now) {
      const sql = await db();
      await sql.run('DELETE FROM approval_grant_uses WHERE expires_at <= ?', [now]);
      await sql.run('DELETE FROM replay_messages WHERE expires_at <= ?', [now]);
      await sql.run('DELETE FROM approval_imports WHERE expires_at <= ?', [now]);
      return sql.run('DELETE FROM idempotency_records WHERE expires_at <= ?', [now]);
    },
    async claimMessage(claim, now) {
      const sql = await db();
      const inserted = await sql.run('INSERT INTO replay_messages (message_id, expires_at) VALUES (?, ?) ON CONFLICT (message_id) DO NOTHING', [
        claim.message_id,
        claim.expires_at,
      ]);
      if (inserted > 0) return true;
      // An expired claim is taken over, unless a concurrent claim just did (the UPDATE re-checks the expiry).
      const replaced = await sql.run('UPDATE replay_messages SET expires_at = ? WHERE message_id = ? AND expires_at <= ?', [
        claim.expires_at,
        claim.message_id,
        now,
      ]);
      return replaced > 0;
    },
    async importApproval(record) {
      const sql = await db();
      const scope = tenantScope(record.tenant_id);
      await sql.run(
        `INSERT INTO approval_imports (tenant_scope, ${IMPORT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_scope, approval_id) DO NOTHING`,
        [scope, record.tenant_id, record.approval_id, record.digest, record.imported_at, record.expires_at],
      );
      const rows = await sql.all(`SELECT ${IMPORT_COLUMNS} FROM approval_imports WHERE tenant_scope = ? AND approval_id = ?`, [scope, record.approval_id]);
      // Purged between the two statements (it expired): nothing stands against this record.
      return rows[0] ? toApprovalImport(rows[0]) : record;
    },
    async useGrant(use) {
      const sql = await db();
      await sql.run(
        `INSERT INTO approval_grant_uses (tenant_scope, ${GRANT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_scope, approval_id) DO NOTHING`,
        [tenantScope(use.tenant_id), use.tenant_id, use.approval_id, use.capability_id, use.idempotency_key, use.action_id, use.used_at, use.expires_at],
      );
      const rows = await sql.all(`SELECT ${GRANT_COLUMNS} FROM approval_grant_uses WHERE tenant_scope = ? AND approval_id = ?`, [
        tenantScope(use.tenant_id),
        use.approval_id,
      ]);
      // Purged between the two statements (its grant expired): the grant is refused anyway.
      return rows[0] ? toGrantUse(rows[0]) : use;
    },
    async recordRun(evidence) {
      const { sql, params } = recordRunStatement(evidence);
      await (await db()).run(sql, params);
    },
    async updateRun(run, patch) {
      const { sql, params } = updateRunStatement(run, patch);
      await (await db()).run(sql, params);
    },
    async evidence(actionIdOrRunId, tenantId) {
      const scoped = tenantId === undefined ? '' : ' AND tenant_scope = ?';
      const rows = await (await db()).all(`SELECT ${RUN_COLUMNS} FROM run_bindings WHERE (action_id = ? OR run_id = ?)${scoped}`, [
        actionIdOrRunId,
        actionIdOrRunId,
        ...(tenantId === undefined ? [] : [tenantScope(tenantId)]),
      ]);
      return pickEvidence(actionIdOrRunId, rows.map(toEvidence));
    },
    async openRuns() {
      const rows = await (await db()).all(
        `SELECT ${RUN_COLUMNS} FROM run_bindings WHERE evidence_lost = 0 AND last_status NOT IN (${TERMINAL_LIST}) ORDER BY created_at`,
        [],
      );
      return rows.map(toEvidence);
    },
    async createJob(job) {
      const tenantId = job.tenant_id ?? null;
      const changed = await (await db()).run(
        `INSERT INTO herm_jobs (tenant_scope, ${JOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (tenant_scope, session_id, tool_use_id) DO NOTHING`,
        [
          tenantScope(tenantId),
          tenantId,
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
    async updateJob(sessionId, toolUseId, patch, tenantId) {
      const fields = (['run_id', 'state', 'kickoff', 'kickoff_event_id', 'final_status', 'final_event_id'] as const).filter(
        (field) => patch[field] !== undefined,
      );
      await (await db()).run(`UPDATE herm_jobs SET updated_at = ?${fields.map((field) => `, ${field} = ?`).join('')} WHERE ${JOB}`, [
        patch.updated_at,
        ...fields.map((field) => patch[field]),
        ...jobParams(sessionId, toolUseId, tenantId),
      ]);
    },
    async job(sessionId, toolUseId, tenantId) {
      const rows = await (await db()).all(`SELECT ${JOB_COLUMNS} FROM herm_jobs WHERE ${JOB}`, jobParams(sessionId, toolUseId, tenantId));
      return rows[0] ? toJob(rows[0]) : null;
    },
    async unfinishedJobs(tenantId) {
      const rows = await (await db()).all(`SELECT ${JOB_COLUMNS} FROM herm_jobs WHERE tenant_scope = ? AND state <> 'done' ORDER BY created_at`, [
        tenantScope(tenantId ?? null),
      ]);
      return rows.map(toJob);
    },
    async claimJob(sessionId, toolUseId, owner, now, leaseExpiresAt, tenantId) {
      const changed = await (await db()).run(
        `UPDATE herm_jobs SET lease_owner = ?, lease_expires_at = ?
         WHERE ${JOB} AND state <> 'done' AND (lease_owner IS NULL OR lease_owner = ? OR lease_expires_at IS NULL OR lease_expires_at <= ?)`,
        [owner, leaseExpiresAt, ...jobParams(sessionId, toolUseId, tenantId), owner, now],
      );
      if (changed === 0) return null;
      // The row is this owner's now: reading it back cannot race another claim.
      return this.job(sessionId, toolUseId, tenantId);
    },
    async renewJobLease(sessionId, toolUseId, owner, leaseExpiresAt, tenantId) {
      const changed = await (await db()).run(`UPDATE herm_jobs SET lease_expires_at = ? WHERE ${JOB} AND lease_owner = ?`, [
        leaseExpiresAt,
        ...jobParams(sessionId, toolUseId, tenantId),
        owner,
      ]);
      return changed > 0;
    },
    async close() {
      await setUp.settled();
      await writes.drained();
      await executor.tail.close();
      await executor.close();
    },
  };
  return ledger;
}

const withEvidence = (statement: SqlStatement, evidence: EvidenceWrite | undefined): SqlStatement[] =>
  evidence === undefined
    ? [statement]
    : [statement, 'bind' in evidence ? recordRunStatement(evidence.bind) : updateRunStatement(evidence.update, evidence.patch)];

function recordRunStatement(evidence: RunEvidence): SqlStatement {
  return {
    sql: `INSERT INTO run_bindings (tenant_scope, ${RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (tenant_scope, action_id) DO UPDATE SET capability_id = excluded.capability_id, endpoint_id = excluded.endpoint_id,
           run_id = excluded.run_id, session_id = excluded.session_id, credential_revision = excluded.credential_revision,
           created_at = excluded.created_at, updated_at = excluded.updated_at, last_status = excluded.last_status,
           terminal_event = excluded.terminal_event, evidence_lost = excluded.evidence_lost, learned_from = excluded.learned_from,
           interrupted_at = excluded.interrupted_at`,
    params: [
      tenantScope(evidence.tenant_id),
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
      evidence.learned_from ?? null,
      evidence.interrupted_at ?? null,
    ],
  };
}

function updateRunStatement(run: RunRef, patch: RunEvidencePatch): SqlStatement {
  return {
    sql: `UPDATE run_bindings SET updated_at = ?, ${unlessSettled('last_status')}, ${unlessSettled('terminal_event')}, ${unlessSettled('evidence_lost')},
           ${unlessSettled('interrupted_at')}
         WHERE run_id = ? AND endpoint_id = ? AND tenant_scope = ?`,
    params: [
      patch.updated_at,
      patch.last_status ?? null,
      patch.terminal_event ?? null,
      patch.evidence_lost === undefined ? null : Number(patch.evidence_lost),
      patch.interrupted_at ?? null,
      run.run_id,
      run.endpoint_id,
      tenantScope(run.tenant_id),
    ],
  };
}

const SETUP_RETRY_MIN_MS = 250;
const SETUP_RETRY_MAX_MS = 5_000;

/**
 * The schema set-up, run once and shared by every call. A failed set-up (the database was
 * down) is not kept: a later call tries again, so the ledger recovers by itself. Attempts are
 * spaced (250 ms doubling to 5 s); calls in between fail at once with the last error, which
 * the connector reports as `ledger_unavailable` and logs.
 */
function retryingSetUp(migrate: () => Promise<void>): { ready(): Promise<void>; settled(): Promise<void> } {
  let attempt: Promise<void> | undefined;
  let failures = 0;
  let retryAt = 0;
  let lastError: unknown;
  return {
    ready() {
      if (attempt) return attempt;
      if (failures > 0 && Date.now() < retryAt) return Promise.reject(lastError);
      attempt = migrate().then(
        () => {
          failures = 0;
        },
        (error: unknown) => {
          failures++;
          lastError = error;
          retryAt = Date.now() + Math.min(SETUP_RETRY_MAX_MS, SETUP_RETRY_MIN_MS * 2 ** (failures - 1));
          attempt = undefined;
          throw error;
        },
      );
      return attempt;
    },
    async settled() {
      await attempt?.catch(() => undefined);
    },
  };
}

// PostgreSQL returns BIGINT columns as strings; both backends go through Number here.
const num = (value: unknown): number => Number(value);

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
    // Present only when known, as the memory ledger keeps them: older bindings have neither.
    ...(row.learned_from === null || row.learned_from === undefined ? {} : { learned_from: String(row.learned_from) as RunEvidence['learned_from'] }),
    ...(row.interrupted_at === null || row.interrupted_at === undefined ? {} : { interrupted_at: num(row.interrupted_at) }),
  };
}

function toGrantUse(row: SqlRow): GrantUse {
  return {
    tenant_id: strOrNull(row.tenant_id),
    approval_id: String(row.approval_id),
    capability_id: String(row.capability_id),
    idempotency_key: String(row.idempotency_key),
    action_id: String(row.action_id),
    used_at: num(row.used_at),
    expires_at: num(row.expires_at),
  };
}

function toApprovalImport(row: SqlRow): ApprovalImport {
  return {
    tenant_id: strOrNull(row.tenant_id),
    approval_id: String(row.approval_id),
    digest: String(row.digest),
    imported_at: num(row.imported_at),
    expires_at: num(row.expires_at),
  };
}

function toJob(row: SqlRow): BridgeJob {
  return {
    tenant_id: strOrNull(row.tenant_id),
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
