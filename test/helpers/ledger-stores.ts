/**
 * Durable ledger stores that can also be inspected with plain SQL and reached from a child
 * process: what the ledger suites need beyond test/helpers/ledgers.ts (which hides the
 * PostgreSQL connection details). SQLite always; PostgreSQL when HERMES_TEST_PG_URL is set.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { pgAdmin } from './pg-schema.js';
import { afterAll } from 'vitest';
import { createPostgresLedger, createSqliteLedger, type RunLedger } from 'aip-connector-hermes-agent';
import { PG_URL, createPgSchema } from './ledgers.js';

export interface InspectableStore {
  name: 'sqlite' | 'postgres';
  /** Another ledger over this store (a replica, or the process after a restart); closed after the file's tests. */
  open(): RunLedger;
  /** Plain SQL against the store, outside any ledger (inspection only). */
  query(sql: string): Promise<Array<Record<string, unknown>>>;
  /** What a child process needs to open the same store (read by test/ledger/fixtures/*.mjs). */
  env: Record<string, string>;
}

export interface InspectableBackend {
  name: 'sqlite' | 'postgres';
  create(): Promise<InspectableStore>;
}

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Closes every ledger once; a test may already have closed some (a "process" that ended). */
function tracker(): { track(ledger: RunLedger): RunLedger; closed: Set<RunLedger>; closeAll(): Promise<void> } {
  const opened: RunLedger[] = [];
  const closed = new Set<RunLedger>();
  return {
    closed,
    track(ledger) {
      opened.push(ledger);
      const close = ledger.close.bind(ledger);
      ledger.close = async () => {
        if (closed.has(ledger)) return;
        closed.add(ledger);
        await close();
      };
      return ledger;
    },
    async closeAll() {
      for (const ledger of opened) await ledger.close();
    },
  };
}

const sqlite: InspectableBackend = {
  name: 'sqlite',
  async create() {
    const dir = mkdtempSync(join(tmpdir(), 'aip-ledger-inspect-'));
    const path = join(dir, 'ledger.db');
    const ledgers = tracker();
    cleanups.push(async () => {
      await ledgers.closeAll();
      rmSync(dir, { recursive: true, force: true });
    });
    return {
      name: 'sqlite',
      open: () => ledgers.track(createSqliteLedger({ path })),
      async query(sql) {
        const db = new Database(path, { readonly: true, fileMustExist: true });
        try {
          return db.prepare(sql).all() as Array<Record<string, unknown>>;
        } finally {
          db.close();
        }
      },
      env: { LEDGER_KIND: 'sqlite', LEDGER_SQLITE_PATH: path },
    };
  },
};

const postgres: InspectableBackend = {
  name: 'postgres',
  async create() {
    const { connectionString, drop } = await createPgSchema('aip_inspect');
    const ledgers = tracker();
    cleanups.push(async () => {
      await ledgers.closeAll();
      await drop();
    });
    return {
      name: 'postgres',
      open: () => ledgers.track(createPostgresLedger({ connectionString })),
      query: (sql) => pgAdmin(connectionString, sql),
      env: { LEDGER_KIND: 'postgres', LEDGER_PG_URL: connectionString },
    };
  },
};

/** The durable backends this machine can run, with SQL access and child-process settings. */
export const INSPECTABLE_BACKENDS: InspectableBackend[] = PG_URL ? [sqlite, postgres] : [sqlite];
