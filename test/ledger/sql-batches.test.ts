/**
 * The SQL executors' batch commits on real databases: each unit is atomic and its failure its
 * own; values written as PostgreSQL literals come back exactly; and concurrent ledger writes
 * really share commits.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { SqlUnit } from '../../src/ledger/group-commit.js';
import pg from 'pg';
import { connectPg } from '../helpers/pg-schema.js';
import { executeText, openPostgresExecutor } from '../../src/ledger/postgres.js';
import { createSqlLedger, type SqlExecutor } from '../../src/ledger/sql-ledger.js';
import { openSqliteExecutor } from '../../src/ledger/sqlite.js';
import { PG_URL, createPgSchema } from '../helpers/ledgers.js';

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const HOSTILE = [
  "it's",
  "''",
  '\\',
  "\\'; DROP TABLE batch_rows; --",
  "E'\\x41'",
  '? $1 $2 ?',
  'line\nbreak\r\ttab',
  'ünïcødé ✓ 𝄞',
  '%_*',
  '"quoted"',
  ' ',
  '',
];
const EDGE_NUMBER = (index: number) => (index % 2 === 0 ? -(2 ** 53 - 1) : 2 ** 53 - 1);

interface ExecutorBackend {
  name: string;
  open(): Promise<SqlExecutor>;
}

const BACKENDS: ExecutorBackend[] = [
  {
    name: 'sqlite',
    async open() {
      const dir = mkdtempSync(join(tmpdir(), 'aip-batches-'));
      const executor = openSqliteExecutor({ path: join(dir, 'ledger.db') });
      cleanups.push(async () => {
        await executor.close();
        rmSync(dir, { recursive: true, force: true });
      });
      return executor;
    },
  },
];
if (PG_URL) {
  BACKENDS.push({
    name: 'postgres',
    async open() {
      const schema = await createPgSchema('aip_batches');
      const executor = openPostgresExecutor({ connectionString: schema.connectionString });
      cleanups.push(async () => {
        await executor.close();
        await schema.drop();
      });
      return executor;
    },
  });
}

const TABLE = 'CREATE TABLE batch_rows (id TEXT PRIMARY KEY, note TEXT NOT NULL, amount BIGINT)';
const insert = (id: string, note: string | null, amount: number | null = 1) => ({
  sql: 'INSERT INTO batch_rows (id, note, amount) VALUES (?, ?, ?)',
  params: [id, note, amount],
});

async function tableOn(backend: ExecutorBackend): Promise<SqlExecutor> {
  const executor = await backend.open();
  await executor.commit([[{ sql: TABLE, params: [] }]]);
  return executor;
}

const ids = async (executor: SqlExecutor) => (await executor.all('SELECT id FROM batch_rows ORDER BY id', [])).map((row) => row.id);

describe.each(BACKENDS)('batch commits: $name', (backend) => {
  it('every unit of a batch is committed, and each statement reports the rows it changed', async () => {
    const executor = await tableOn(backend);
    const outcomes = await executor.commit([
      [insert('a', 'x')],
      [insert('b', 'x'), { sql: 'UPDATE batch_rows SET amount = 2 WHERE id IN (?, ?)', params: ['a', 'b'] }],
    ]);
    expect(outcomes).toEqual([[1], [1, 2]]);
    expect(await executor.all('SELECT id, amount FROM batch_rows ORDER BY id', [])).toEqual([
      { id: 'a', amount: backend.name === 'postgres' ? '2' : 2 },
      { id: 'b', amount: backend.name === 'postgres' ? '2' : 2 },
    ]);
  });

  it("a failing unit is undone whole (its first statement too) and is that unit's failure alone", async () => {
    const executor = await tableOn(backend);
    const units: SqlUnit[] = [[insert('a', 'x')], [insert('b1', 'x'), insert('b2', null)], [insert('c', 'x')]];
    const outcomes = await executor.commit(units);
    expect(outcomes[0]).toEqual([1]);
    expect(outcomes[1]).toBeInstanceOf(Error);
    expect(String(outcomes[1])).toMatch(/null/i);
    expect(outcomes[2]).toEqual([1]);
    expect(await ids(executor)).toEqual(['a', 'c']);
  });

  it('units conflicting with each other in one batch are applied in order', async () => {
    const executor = await tableOn(backend);
    const outcomes = await executor.commit([
      [insert('a', 'first')],
      [insert('a', 'second')],
      [{ sql: 'UPDATE batch_rows SET note = ? WHERE id = ?', params: ['third', 'a'] }],
    ]);
    expect(outcomes[0]).toEqual([1]);
    expect(outcomes[1]).toBeInstanceOf(Error);
    expect(outcomes[2]).toEqual([1]);
    expect(await executor.all('SELECT note FROM batch_rows', [])).toEqual([{ note: 'third' }]);
  });

  it('hostile text and edge numbers come back exactly from a batch', async () => {
    const executor = await tableOn(backend);
    const units = HOSTILE.map((note, index) => [insert(`row${String(index).padStart(2, '0')}`, note, EDGE_NUMBER(index))]);
    const outcomes = await executor.commit(units);
    expect(outcomes.every((outcome) => Array.isArray(outcome))).toBe(true);
    const rows = await executor.all('SELECT note, amount FROM batch_rows ORDER BY id', []);
    expect(rows.map((row) => row.note)).toEqual(HOSTILE);
    expect(rows.map((row) => Number(row.amount))).toEqual(HOSTILE.map((_, index) => EDGE_NUMBER(index)));
  });

  // SQLite binds NaN as NULL; PostgreSQL's literal writer refuses it.
  it.runIf(backend.name === 'postgres')('a value no SQL literal can hold fails its own unit, not the batch', async () => {
    const executor = await tableOn(backend);
    const outcomes = await executor.commit([[insert('a', 'x')], [insert('b', 'x', Number.NaN)], [insert('c', 'x')]]);
    expect(outcomes[0]).toEqual([1]);
    expect(outcomes[1]).toBeInstanceOf(Error);
    expect(outcomes[2]).toEqual([1]);
    expect(await ids(executor)).toEqual(['a', 'c']);
  });

  it('64 concurrent claims through the ledger share a few commits, and each is answered as if alone', async () => {
    const executor = await backend.open();
    const batches: number[] = [];
    const counting: SqlExecutor = {
      ...executor,
      commit: (units) => {
        batches.push(units.length);
        return executor.commit(units);
      },
    };
    const ledger = createSqlLedger(backend.name, counting);
    const now = Date.now();
    const claim = (key: string, owner: string) =>
      ledger.claim({
        capability_id: 'cap:x',
        idempotency_key: key,
        fingerprint: 'f',
        action_id: `act_${owner}`,
        owner,
        now,
        lease_expires_at: now + 60_000,
        expires_at: now + 3_600_000,
      });
    // 32 keys, each claimed twice: exactly one claim per key owns it.
    const claims = await Promise.all(Array.from({ length: 64 }, (_, index) => claim(`key-${index % 32}`, `owner-${index}`)));
    expect(claims.filter((result) => result.claimed)).toHaveLength(32);
    const losers = claims.filter((result) => !result.claimed);
    expect(new Set(losers.map((result) => (result.claimed ? '' : result.record.idempotency_key))).size).toBe(32);
    expect(batches.length).toBeLessThan(16);
    expect(Math.max(...batches)).toBeGreaterThan(8);
  });
});

describe.runIf(PG_URL)('PostgreSQL batch text', () => {
  // The executor falls back to parameters when a batch fails, which would hide a bad literal:
  // here the EXECUTE text itself must run, as one query, and store every value exactly.
  it('writes every hostile value as a literal PostgreSQL reads back exactly, in one query', async () => {
    const schema = await createPgSchema('aip_batch_text');
    const client = await connectPg(schema.connectionString);
    try {
      await client.query(TABLE);
      await client.query('PREPARE hostile_insert AS INSERT INTO batch_rows (id, note, amount) VALUES ($1, $2, $3)');
      const statements = HOSTILE.map((note, index) => insert(`row${String(index).padStart(2, '0')}`, note, EDGE_NUMBER(index)));
      const results = await client.query(statements.map((statement) => executeText(statement, 'hostile_insert', pg.escapeLiteral)).join(';\n'));
      expect(Array.isArray(results) ? results.map((result) => result.rowCount) : []).toEqual(HOSTILE.map(() => 1));
      const rows = await client.query('SELECT note, amount FROM batch_rows ORDER BY id');
      expect(rows.rows.map((row) => row.note)).toEqual(HOSTILE);
      expect(rows.rows.map((row) => Number(row.amount))).toEqual(HOSTILE.map((_, index) => EDGE_NUMBER(index)));
    } finally {
      await client.end();
      await schema.drop();
    }
  });

  it('refuses a value no literal can hold (NaN, Infinity, an object) rather than guess', () => {
    for (const value of [Number.NaN, Number.POSITIVE_INFINITY, { toString: () => '1' }, true]) {
      expect(() => executeText(insert('a', 'x', value as number), 'any', pg.escapeLiteral)).toThrow(TypeError);
    }
  });
});
