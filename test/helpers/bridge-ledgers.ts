/**
 * Durable ledger stores that a child process can open too (test/helpers/ledgers.ts keeps the
 * PostgreSQL connection string to itself): SQLite always, PostgreSQL when HERMES_TEST_PG_URL
 * is set. Each store is isolated (its own file or schema) and removed after the file's tests.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { createPostgresLedger, createSqliteLedger, type RunLedger } from 'aip-connector-hermes-agent';
import type { BridgeProcessConfig } from '../bridge/fixtures/bridge-process.js';
import { PG_URL, createPgSchema } from './ledgers.js';

export interface SharedStore {
  /** Another ledger over the store (the process after a restart); closed after the file's tests. */
  open(): RunLedger;
  /** How a child process opens the same store. */
  spec: BridgeProcessConfig['ledger'];
}

export interface SharedBackend {
  name: 'sqlite' | 'postgres';
  create(): Promise<SharedStore>;
}

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function opener(create: () => RunLedger): { open(): RunLedger; closeAll(): Promise<void> } {
  const opened: RunLedger[] = [];
  return {
    open() {
      const ledger = create();
      opened.push(ledger);
      return ledger;
    },
    async closeAll() {
      for (const ledger of opened.splice(0)) await ledger.close().catch(() => undefined);
    },
  };
}

const sqlite: SharedBackend = {
  name: 'sqlite',
  async create() {
    const dir = mkdtempSync(join(tmpdir(), 'aip-bridge-ledger-'));
    const path = join(dir, 'ledger.db');
    const ledgers = opener(() => createSqliteLedger({ path }));
    cleanups.push(async () => {
      await ledgers.closeAll();
      rmSync(dir, { recursive: true, force: true });
    });
    return { open: ledgers.open, spec: { kind: 'sqlite', path } };
  },
};

const postgres: SharedBackend = {
  name: 'postgres',
  async create() {
    const { connectionString, drop } = await createPgSchema('aip_bridge');
    const ledgers = opener(() => createPostgresLedger({ connectionString }));
    cleanups.push(async () => {
      await ledgers.closeAll();
      await drop();
    });
    return { open: ledgers.open, spec: { kind: 'postgres', connectionString } };
  },
};

export const SHARED_BACKENDS: SharedBackend[] = PG_URL ? [sqlite, postgres] : [sqlite];
