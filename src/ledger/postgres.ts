import type { Pool as PgPool, PoolConfig } from 'pg';
import { ConnectorConfigError } from '../config.js';
import { MIGRATIONS_TABLE, pendingMigrations } from './migrations.js';
import { loadOptional } from './optional-module.js';
import { createSqlLedger, type SqlExecutor, type SqlRow } from './sql-ledger.js';
import type { RunLedger } from './types.js';

export interface PostgresLedgerOptions {
  connectionString: string;
  /** Pool size (default 10). */
  maxConnections?: number;
}

/** Any constant: the advisory lock that serializes schema migrations between replicas. */
const MIGRATION_LOCK = 0x41495048; // 'AIPH'

/** A ledger in PostgreSQL (pg 8), shared by several connector replicas. */
export function createPostgresLedger(options: PostgresLedgerOptions): RunLedger {
  if (typeof options?.connectionString !== 'string' || options.connectionString === '') {
    throw new ConnectorConfigError('invalid_ledger', 'createPostgresLedger needs a `connectionString`');
  }
  const pg = loadOptional<{ Pool: new (config: PoolConfig) => PgPool }>('pg', 'pg@8', 'createPostgresLedger');
  const pool = new pg.Pool({ connectionString: options.connectionString, max: options.maxConnections ?? 10 });
  // An idle client's error (server restart) must not crash the host; the next query reports it.
  pool.on('error', () => undefined);

  const executor: SqlExecutor = {
    async migrate() {
      const client = await pool.connect();
      // A checked-out client has no pool listener: a backend ended under it (pg_terminate_backend, a
      // restart) must fail the set-up through the query in progress, not crash the host.
      let broken: Error | undefined;
      const onError = (error: Error) => {
        broken = error;
      };
      client.on('error', onError);
      try {
        await client.query('BEGIN');
        await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
        await client.query(MIGRATIONS_TABLE);
        const applied = await client.query<{ version: number }>('SELECT version FROM ledger_schema_migrations');
        for (const migration of pendingMigrations(applied.rows.map((row) => Number(row.version)))) {
          for (const statement of migration.statements) await client.query(statement);
          await client.query('INSERT INTO ledger_schema_migrations (version, applied_at) VALUES ($1, $2)', [migration.version, Date.now()]);
        }
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      } finally {
        client.off('error', onError);
        // A broken connection is destroyed rather than returned to the pool.
        client.release(broken);
      }
    },
    async all(sql, params) {
      return (await pool.query(numbered(sql), params)).rows as SqlRow[];
    },
    async run(sql, params) {
      return (await pool.query(numbered(sql), params)).rowCount ?? 0;
    },
    async close() {
      if (!pool.ended) await pool.end();
    },
  };
  return createSqlLedger('postgres', executor);
}

/** `?` placeholders as PostgreSQL's `$1, $2, …` (the ledger's SQL has no `?` inside literals). */
function numbered(sql: string): string {
  let index = 0;
  return sql.replace(/\?/g, () => `$${++index}`);
}
