/**
 * A ledger written by an older schema version, upgraded on first use: the same case on a fresh
 * SQLite file and (when a server is configured) a fresh PostgreSQL schema. The case writes the old
 * schema and its rows through `exec`, then opens the ledger over them with `open`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, it } from 'vitest';
import { createPostgresLedger, createSqliteLedger, type RunLedger } from 'aip-connector-hermes-agent';
import { PG_URL, createPgSchema } from './ledgers.js';
import { connectPg } from './pg-schema.js';

export type UpgradeCase = (exec: (sql: string) => Promise<void>, open: () => RunLedger) => Promise<void>;

export function describeSchemaUpgrade(title: string, upgradeCase: UpgradeCase): void {
  describe(title, () => {
    it('SQLite', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'aip-ledger-upgrade-'));
      const path = join(dir, 'ledger.db');
      try {
        const db = new Database(path);
        await upgradeCase(
          async (sql) => void db.exec(sql),
          () => createSqliteLedger({ path }),
        );
        db.close();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it.runIf(PG_URL)('PostgreSQL', async () => {
      const { connectionString, drop } = await createPgSchema('aip_upgrade');
      const client = await connectPg(connectionString);
      try {
        await upgradeCase(
          async (sql) => void (await client.query(sql)),
          () => createPostgresLedger({ connectionString }),
        );
      } finally {
        await client.end();
        await drop();
      }
    });
  });
}
