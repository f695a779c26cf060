/**
 * The ledger's schema, in versions. SQLite and PostgreSQL share this DDL: BIGINT and TEXT
 * mean the same in both, and booleans are stored as 0/1 integers.
 */
export interface Migration {
  version: number;
  statements: string[];
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    statements: [
      `CREATE TABLE idempotency_records (
        capability_id TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        action_id TEXT NOT NULL,
        state TEXT NOT NULL,
        result TEXT,
        lease_owner TEXT,
        lease_expires_at BIGINT,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        PRIMARY KEY (capability_id, idempotency_key)
      )`,
      `CREATE INDEX idempotency_records_expires_at ON idempotency_records (expires_at)`,
      `CREATE TABLE run_bindings (
        action_id TEXT PRIMARY KEY,
        capability_id TEXT NOT NULL,
        endpoint_id TEXT NOT NULL,
        tenant_id TEXT,
        run_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        credential_revision TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        last_status TEXT NOT NULL,
        terminal_event TEXT,
        evidence_lost INTEGER NOT NULL DEFAULT 0
      )`,
      `CREATE INDEX run_bindings_run_id ON run_bindings (run_id, endpoint_id)`,
    ],
  },
  {
    version: 2,
    statements: [
      `CREATE TABLE herm_jobs (
        session_id TEXT NOT NULL,
        tool_use_id TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        tool_input TEXT NOT NULL,
        action_id TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        run_id TEXT,
        state TEXT NOT NULL,
        kickoff TEXT NOT NULL,
        kickoff_event_id TEXT,
        final_status TEXT,
        final_event_id TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (session_id, tool_use_id)
      )`,
      `CREATE INDEX herm_jobs_state ON herm_jobs (state)`,
    ],
  },
  {
    version: 3,
    // Jobs recorded before leases existed have none: the first recover() may take them.
    statements: [`ALTER TABLE herm_jobs ADD COLUMN lease_owner TEXT`, `ALTER TABLE herm_jobs ADD COLUMN lease_expires_at BIGINT`],
  },
  {
    version: 4,
    // Bindings become per tenant, like idempotency keys: callers choose action ids, so two tenants
    // may use the same one. A primary key cannot hold NULL, so the key uses tenant_scope
    // ('' for no tenant: tenant ids are never empty). The table is rebuilt (SQLite cannot change
    // a primary key in place); existing rows keep their tenant.
    statements: [
      `CREATE TABLE run_bindings_v4 (
        tenant_scope TEXT NOT NULL,
        action_id TEXT NOT NULL,
        capability_id TEXT NOT NULL,
        endpoint_id TEXT NOT NULL,
        tenant_id TEXT,
        run_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        credential_revision TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        last_status TEXT NOT NULL,
        terminal_event TEXT,
        evidence_lost INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (tenant_scope, action_id)
      )`,
      `INSERT INTO run_bindings_v4 (tenant_scope, action_id, capability_id, endpoint_id, tenant_id, run_id, session_id, credential_revision,
         created_at, updated_at, last_status, terminal_event, evidence_lost)
       SELECT COALESCE(tenant_id, ''), action_id, capability_id, endpoint_id, tenant_id, run_id, session_id, credential_revision,
         created_at, updated_at, last_status, terminal_event, evidence_lost FROM run_bindings`,
      `DROP TABLE run_bindings`,
      `ALTER TABLE run_bindings_v4 RENAME TO run_bindings`,
      `CREATE INDEX run_bindings_run_id ON run_bindings (run_id, endpoint_id)`,
      `CREATE INDEX run_bindings_action_id ON run_bindings (action_id)`,
      `CREATE TABLE approval_grant_uses (
        tenant_scope TEXT NOT NULL,
        approval_id TEXT NOT NULL,
        tenant_id TEXT,
        capability_id TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        action_id TEXT NOT NULL,
        used_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        PRIMARY KEY (tenant_scope, approval_id)
      )`,
      `CREATE INDEX approval_grant_uses_expires_at ON approval_grant_uses (expires_at)`,
    ],
  },
  {
    version: 5,
    // Jobs become per tenant like bindings: two tenants' Herm sessions may use the same session and
    // tool-use ids, and a bridge recovers only its own tenant's jobs. The table is rebuilt (a new
    // primary key); an existing job takes the tenant of the one tenant that bound its action id, if
    // any (a job whose start left no binding belongs to no tenant).
    statements: [
      `CREATE TABLE herm_jobs_v5 (
        tenant_scope TEXT NOT NULL,
        tenant_id TEXT,
        session_id TEXT NOT NULL,
        tool_use_id TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        tool_input TEXT NOT NULL,
        action_id TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        run_id TEXT,
        state TEXT NOT NULL,
        kickoff TEXT NOT NULL,
        kickoff_event_id TEXT,
        final_status TEXT,
        final_event_id TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        lease_owner TEXT,
        lease_expires_at BIGINT,
        PRIMARY KEY (tenant_scope, session_id, tool_use_id)
      )`,
      `INSERT INTO herm_jobs_v5 (tenant_scope, tenant_id, session_id, tool_use_id, tool_name, tool_input, action_id, idempotency_key, run_id, state,
         kickoff, kickoff_event_id, final_status, final_event_id, created_at, updated_at, lease_owner, lease_expires_at)
       SELECT COALESCE(owner.tenant_scope, ''), owner.tenant_id, j.session_id, j.tool_use_id, j.tool_name, j.tool_input, j.action_id, j.idempotency_key,
         j.run_id, j.state, j.kickoff, j.kickoff_event_id, j.final_status, j.final_event_id, j.created_at, j.updated_at, j.lease_owner, j.lease_expires_at
       FROM herm_jobs j LEFT JOIN (
         SELECT action_id, MIN(tenant_scope) AS tenant_scope, MIN(tenant_id) AS tenant_id FROM run_bindings
         GROUP BY action_id HAVING COUNT(DISTINCT tenant_scope) = 1
       ) owner ON owner.action_id = j.action_id`,
      `DROP TABLE herm_jobs`,
      `ALTER TABLE herm_jobs_v5 RENAME TO herm_jobs`,
      `CREATE INDEX herm_jobs_state ON herm_jobs (tenant_scope, state)`,
    ],
  },
  {
    version: 6,
    // The AIP connector host's replay store: every replica on the database refuses a message id
    // another one accepted, and a restarted host still does, until the id's window closes. And the
    // approval records it imported: a different record under an imported approval id is a conflict.
    statements: [
      `CREATE TABLE replay_messages (message_id TEXT PRIMARY KEY, expires_at BIGINT NOT NULL)`,
      `CREATE INDEX replay_messages_expires_at ON replay_messages (expires_at)`,
      `CREATE TABLE approval_imports (
        tenant_scope TEXT NOT NULL,
        approval_id TEXT NOT NULL,
        tenant_id TEXT,
        digest TEXT NOT NULL,
        imported_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        PRIMARY KEY (tenant_scope, approval_id)
      )`,
      `CREATE INDEX approval_imports_expires_at ON approval_imports (expires_at)`,
    ],
  },
  {
    version: 7,
    // The run event journal: one row per followed run, held by its follower through a lease, and
    // its events keyed by (run, sequence) so that an append repeated by a follower that took the
    // run over cannot store an event twice. events_lost is a JSON array of recorded gaps.
    statements: [
      `CREATE TABLE run_journals (
        tenant_scope TEXT NOT NULL,
        tenant_id TEXT,
        endpoint_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        state TEXT NOT NULL,
        owner TEXT,
        lease_expires_at BIGINT,
        next_sequence BIGINT NOT NULL,
        last_hermes_seq BIGINT,
        bytes BIGINT NOT NULL,
        events_lost TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        closed_at BIGINT,
        close_reason TEXT,
        PRIMARY KEY (tenant_scope, endpoint_id, run_id)
      )`,
      `CREATE INDEX run_journals_following ON run_journals (state, lease_expires_at)`,
      `CREATE INDEX run_journals_closed_at ON run_journals (closed_at)`,
      `CREATE TABLE run_journal_events (
        tenant_scope TEXT NOT NULL,
        endpoint_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        sequence BIGINT NOT NULL,
        event TEXT NOT NULL,
        PRIMARY KEY (tenant_scope, endpoint_id, run_id, sequence)
      )`,
    ],
  },
  {
    version: 8,
    // How a binding's run was learned (the start's answer, or Hermes' replay of a start sent again),
    // and when Hermes, by its own record, marked the run interrupted. Older bindings know neither.
    statements: [`ALTER TABLE run_bindings ADD COLUMN learned_from TEXT`, `ALTER TABLE run_bindings ADD COLUMN interrupted_at BIGINT`],
  },
  {
    version: 9,
    // The outbox of run events: a delivery cursor per (run, target) over the journal's events, not a
    // copy of them. Rows are created with their journal and raised (queued_through) with each append,
    // in the same transactions; a deliverer holds a row through a lease and advances delivered_through.
    statements: [
      `CREATE TABLE run_deliveries (
        tenant_scope TEXT NOT NULL,
        tenant_id TEXT,
        endpoint_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        target_id TEXT NOT NULL,
        state TEXT NOT NULL,
        owner TEXT,
        lease_expires_at BIGINT,
        delivered_through BIGINT NOT NULL,
        queued_through BIGINT NOT NULL,
        attempts INTEGER NOT NULL,
        next_attempt_at BIGINT,
        first_failure_at BIGINT,
        last_error TEXT,
        given_up_reason TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (tenant_scope, endpoint_id, run_id, target_id)
      )`,
      `CREATE INDEX run_deliveries_open ON run_deliveries (target_id, state, lease_expires_at)`,
      `CREATE INDEX run_deliveries_updated_at ON run_deliveries (state, updated_at)`,
      `CREATE INDEX run_deliveries_run_id ON run_deliveries (run_id)`,
    ],
  },
];

/** The primary-key form of a tenant: '' stands for "no tenant" (tenant ids are never empty). */
export function tenantScope(tenantId: string | null): string {
  return tenantId ?? '';
}

export const MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS ledger_schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`;

/** Migrations newer than what the database reports as applied, in order. */
export function pendingMigrations(applied: Iterable<number>): Migration[] {
  const done = new Set(applied);
  return MIGRATIONS.filter((migration) => !done.has(migration.version));
}
