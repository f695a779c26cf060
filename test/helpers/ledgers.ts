import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { createPgSchemaOn } from './pg-schema.js';
import { createMemoryLedger, createPostgresLedger, createSqliteLedger, type RunLedger } from 'aip-connector-hermes-agent';

/** The PostgreSQL server for the shared-ledger suites: set by .ci/run, or by a developer who has one. */
export const PG_URL = process.env.HERMES_TEST_PG_URL;

if (!PG_URL) {
  if (process.env.CI) throw new Error('HERMES_TEST_PG_URL is not set in CI: the PostgreSQL ledger suite must run there (see .ci/run)');
  console.warn('\n*** PostgreSQL ledger tests are SKIPPED: set HERMES_TEST_PG_URL=postgres://user:pass@127.0.0.1:5432/db to run them (CI always does). ***\n');
}

export interface LedgerBackend {
  name: 'memory' | 'sqlite' | 'postgres';
  /** Whether this backend survives its process (and so can be shared by two connectors or a restarted one). */
  durable: boolean;
  /** A new, isolated store. */
  create(): Promise<LedgerStore>;
}

/** One isolated store; `open()` gives another ledger over the same data (a second replica, or the process after a restart). */
export interface LedgerStore {
  ledger: RunLedger;
  open(): RunLedger;
  /** SQLite only: the database file. */
  path?: string;
}

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const memory: LedgerBackend = {
  name: 'memory',
  durable: false,
  async create() {
    const ledger = createMemoryLedger();
    return { ledger, open: () => ledger };
  },
};

const sqlite: LedgerBackend = {
  name: 'sqlite',
  durable: true,
  async create() {
    const dir = mkdtempSync(join(tmpdir(), 'aip-ledger-'));
    const path = join(dir, 'ledger.db');
    const opened: RunLedger[] = [];
    const open = () => {
      const ledger = createSqliteLedger({ path });
      opened.push(ledger);
      return ledger;
    };
    cleanups.push(async () => {
      for (const ledger of opened) await ledger.close();
      rmSync(dir, { recursive: true, force: true });
    });
    return { ledger: open(), open, path };
  },
};

/** A fresh schema on the test server (see pg-schema.ts). */
export async function createPgSchema(prefix: string): Promise<{ connectionString: string; drop(): Promise<void> }> {
  return createPgSchemaOn(PG_URL as string, prefix);
}

const postgres: LedgerBackend = {
  name: 'postgres',
  durable: true,
  async create() {
    const { connectionString, drop } = await createPgSchema('aip_test');
    const opened: RunLedger[] = [];
    const open = () => {
      const ledger = createPostgresLedger({ connectionString });
      opened.push(ledger);
      return ledger;
    };
    cleanups.push(async () => {
      for (const ledger of opened) await ledger.close();
      await drop();
    });
    return { ledger: open(), open };
  },
};

/** The backends this machine can run: memory and SQLite always, PostgreSQL when a server is configured. */
export const LEDGER_BACKENDS: LedgerBackend[] = PG_URL ? [memory, sqlite, postgres] : [memory, sqlite];
export const DURABLE_BACKENDS = LEDGER_BACKENDS.filter((backend) => backend.durable);
