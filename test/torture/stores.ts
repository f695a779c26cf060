/**
 * The durable store a torture run shares between its child processes, and the parent's plain-SQL
 * view of it: a fresh SQLite file, or a fresh schema on the PostgreSQL server. The PostgreSQL
 * children connect with their own `application_name`, so a fault can end exactly their backends.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createPgSchemaOn, pgAdmin } from '../helpers/pg-schema.js';
import type { LedgerSpec } from './plan.js';

export type Row = Record<string, unknown>;

export interface TortureStore {
  spec: LedgerSpec;
  query(sql: string): Promise<Row[]>;
  /** SQLite: `PRAGMA integrity_check` ('ok' when sound); PostgreSQL: null. */
  integrity(): Promise<string | null>;
  /** PostgreSQL: ends every backend the children hold; returns how many. */
  terminateBackends(): Promise<number>;
  remove(): Promise<void>;
}

const tablesExist = (db: Database.Database) => db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'run_deliveries'").get() !== undefined;

export function createSqliteStore(): TortureStore {
  const dir = mkdtempSync(join(tmpdir(), 'aip-torture-'));
  const path = join(dir, 'ledger.db');
  /** Read-write, so that WAL recovery may run after a kill; no file yet (killed before it opened one) reads as empty. */
  const read = <T>(use: (db: Database.Database) => T, empty: T): T => {
    if (!existsSync(path)) return empty;
    const db = new Database(path, { fileMustExist: true });
    try {
      return use(db);
    } finally {
      db.close();
    }
  };
  return {
    spec: { kind: 'sqlite', path },
    // A child killed before its migrations ran leaves a file without the tables: that reads as empty too.
    query: async (sql) => read((db) => (tablesExist(db) ? (db.prepare(sql).all() as Row[]) : []), []),
    integrity: async () =>
      read((db) => (db.pragma('integrity_check') as Array<{ integrity_check: string }>).map((row) => row.integrity_check).join('; '), 'ok'),
    terminateBackends: async () => 0,
    remove: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

export async function createPostgresStore(serverUrl: string): Promise<TortureStore> {
  const schema = await createPgSchemaOn(serverUrl, 'aip_torture');
  const url = new URL(schema.connectionString);
  url.searchParams.set('application_name', schema.name);
  return {
    spec: { kind: 'postgres', connectionString: url.toString() },
    query: (sql) => pgAdmin(schema.connectionString, sql),
    integrity: async () => null,
    async terminateBackends() {
      const rows = await pgAdmin(serverUrl, `SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE application_name = '${schema.name}'`);
      return rows.filter((row) => row.ended === true).length;
    },
    remove: () => schema.drop(),
  };
}
