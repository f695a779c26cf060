import { randomUUID } from 'node:crypto';
import { closeSync, openSync, type Stats, statSync } from 'node:fs';
import { resolve } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { ConnectorConfigError } from '../config.js';
import { MIGRATIONS_TABLE, pendingMigrations } from './migrations.js';
import { loadOptional } from './optional-module.js';
import { inProcessTail } from './journal-tail.js';
import { asError, type SqlUnit, type UnitOutcome } from './group-commit.js';
import { createSqlLedger, type SqlExecutor, type SqlRow } from './sql-ledger.js';
import type { RunLedger } from './types.js';

export interface SqliteLedgerOptions {
  /** The database file (created when missing), or ':memory:'. */
  path: string;
}

/** A durable ledger in one SQLite file (better-sqlite3 12): the embedded default for a single host. */
export function createSqliteLedger(options: SqliteLedgerOptions): RunLedger {
  return createSqlLedger('sqlite', openSqliteExecutor(options));
}

/** The ledger's statements on one better-sqlite3 connection. */
export function openSqliteExecutor(options: SqliteLedgerOptions): SqlExecutor {
  if (typeof options?.path !== 'string' || options.path === '') {
    throw new ConnectorConfigError('invalid_ledger', 'createSqliteLedger needs a `path`');
  }
  const Database = loadOptional<typeof BetterSqlite3>('better-sqlite3', 'better-sqlite3@12', 'createSqliteLedger');
  if (options.path !== ':memory:') prepareLedgerFile(options.path);
  const db = new Database(options.path);
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  db.pragma('synchronous = NORMAL');
  const statements = new Map<string, BetterSqlite3.Statement>();
  const prepare = (sql: string) => {
    let statement = statements.get(sql);
    if (!statement) {
      statement = db.prepare(sql);
      statements.set(sql, statement);
    }
    return statement;
  };
  const runUnit = (unit: SqlUnit) => unit.map((statement) => prepare(statement.sql).run(...statement.params).changes);
  // Called inside the batch's transaction, better-sqlite3 makes this a SAVEPOINT: a failing unit
  // is undone alone.
  const unitTransaction = db.transaction(runUnit);
  const batchTransaction = db.transaction((units: readonly SqlUnit[]) =>
    // A lone unit needs no SAVEPOINT: its failure rolls back a transaction that holds nothing else.
    units.length === 1
      ? units.map(runUnit)
      : units.map((unit): UnitOutcome => {
          try {
            return unitTransaction(unit);
          } catch (error) {
            // Some errors (a full disk, I/O) make SQLite roll back the whole transaction: then every unit failed.
            if (!db.inTransaction) throw error;
            return asError(error);
          }
        }),
  );

  const executor: SqlExecutor = {
    async migrate() {
      // Synchronous and IMMEDIATE: two processes opening one file cannot both apply a version.
      db.transaction(() => {
        db.exec(MIGRATIONS_TABLE);
        const applied = db.prepare('SELECT version FROM ledger_schema_migrations').all() as Array<{ version: number }>;
        for (const migration of pendingMigrations(applied.map((row) => row.version))) {
          for (const statement of migration.statements) db.exec(statement);
          db.prepare('INSERT INTO ledger_schema_migrations (version, applied_at) VALUES (?, ?)').run(migration.version, Date.now());
        }
      }).immediate();
    },
    async all(sql, params) {
      return prepare(sql).all(...params) as SqlRow[];
    },
    // IMMEDIATE: the write lock is taken at BEGIN, so a batch never fails half-way on another process's lock.
    async commit(units) {
      return batchTransaction.immediate(units);
    },
    // Synchronous: a batch is committed before the next one can start.
    groupCommit: { maxInFlight: 1, maxBatch: 256 },
    // Every ledger of this process on the file shares the channel; another process's readers do not hear it.
    tail: inProcessTail(options.path === ':memory:' ? `:memory:${randomUUID()}` : resolve(options.path)),
    async close() {
      if (db.open) db.close();
    },
  };
  return executor;
}

/**
 * The ledger holds run inputs, outputs and journal text: an existing file (or the -wal and -shm
 * files SQLite keeps beside it) that others may write is refused, and a new one is created
 * owner-only before SQLite opens it, since SQLite gives its -wal and -shm files the database's mode.
 */
function prepareLedgerFile(path: string): void {
  for (const file of [path, `${path}-wal`, `${path}-shm`]) refuseWritableByOthers(file);
  try {
    closeSync(openSync(path, 'wx', 0o600));
  } catch {
    // It exists (and was checked above), or SQLite's own open fails and says why in its words.
  }
}

function refuseWritableByOthers(path: string): void {
  const stat = statOrUndefined(path);
  // Anything but a file that can be read (a folder given by mistake, a path through a file) SQLite refuses in its own words.
  if (!stat?.isFile() || (stat.mode & 0o022) === 0) return;
  const octal = (stat.mode & 0o7777).toString(8).padStart(4, '0');
  throw new ConnectorConfigError(
    'insecure_ledger_file',
    `createSqliteLedger: ${path} is writable by its group or others (mode ${octal}); it holds run inputs, outputs and journals: chmod go-w it`,
  );
}

function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}
