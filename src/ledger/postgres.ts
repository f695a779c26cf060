import type { Client as PgClient, ClientConfig, DatabaseError, Pool as PgPool, PoolClient, PoolConfig, QueryResult } from 'pg';
import { ConnectorConfigError } from '../config.js';
import { MIGRATIONS_TABLE, pendingMigrations } from './migrations.js';
import { loadOptional } from './optional-module.js';
import { type JournalTail, TopicListeners } from './journal-tail.js';
import { asError, type SqlStatement, type SqlUnit, type UnitOutcome } from './group-commit.js';
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
  return createSqlLedger('postgres', openPostgresExecutor(options));
}

/** The ledger's statements on a pg pool. */
export function openPostgresExecutor(options: PostgresLedgerOptions): SqlExecutor {
  if (typeof options?.connectionString !== 'string' || options.connectionString === '') {
    throw new ConnectorConfigError('invalid_ledger', 'createPostgresLedger needs a `connectionString`');
  }
  const pg = loadOptional<PgModule>('pg', 'pg@8', 'createPostgresLedger');
  const maxConnections = options.maxConnections ?? 10;
  const pool = new pg.Pool({ connectionString: options.connectionString, max: maxConnections });
  // A backend can end at any moment (pg_terminate_backend, a failover, a restart), and a pg client
  // with no 'error' listener then crashes the host. The pool listens only while a client is idle,
  // so every client listens for its whole life, from the moment it connects: checked out, in the
  // gap between its checkout and the code that awaits it (the backend's FATAL can arrive in the
  // same read as the ReadyForQuery that handed it over), and while it is being ended. The query in
  // progress, or the next one, reports the error; a broken client is destroyed, never reused.
  const broken = new WeakSet<PoolClient>();
  pool.on('connect', (client) => client.on('error', () => broken.add(client)));
  // An idle client's error: the pool has dropped it already, and the next query opens another.
  pool.on('error', () => undefined);

  const withClient = async <T>(work: (client: PoolClient) => Promise<T>): Promise<T> => {
    const client = await pool.connect();
    try {
      return await work(client);
    } finally {
      client.release(broken.has(client));
    }
  };

  // Every statement the ledger runs is parsed and planned once per connection: through the
  // protocol for single statements and reads, and with SQL PREPARE for the batches' EXECUTEs.
  const prepared = new Map<string, PreparedStatement>();
  const preparedFor = (sql: string): PreparedStatement => {
    let statement = prepared.get(sql);
    if (!statement) {
      const name = `aip_ledger_${prepared.size + 1}`;
      statement = { name, protocolName: `${name}_q`, text: numbered(sql) };
      prepared.set(sql, statement);
    }
    return statement;
  };
  const query = (sql: string, params: unknown[]) => {
    const { protocolName, text } = preparedFor(sql);
    return pool.query<SqlRow>({ name: protocolName, text, values: params });
  };
  const preparedOn = new WeakMap<PoolClient, Set<string>>();
  const runBatch = (statements: PreparedStatement[], text: string) =>
    withClient(async (client) => {
      const onClient = preparedOn.get(client) ?? new Set<string>();
      preparedOn.set(client, onClient);
      // One at a time, each remembered once it exists: the set never disagrees with the session.
      for (const statement of new Set(statements)) {
        if (onClient.has(statement.name)) continue;
        await client.query(`PREPARE ${statement.name} AS ${statement.text}`);
        onClient.add(statement.name);
      }
      // One simple-protocol query: one round trip, and PostgreSQL runs its statements as one
      // implicit transaction, so the whole batch costs one commit.
      return client.query<SqlRow>(text);
    });

  const executor: SqlExecutor = {
    async migrate() {
      await withClient(async (client) => {
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
        }
      });
    },
    async all(sql, params) {
      return (await query(sql, params)).rows;
    },
    async commit(units) {
      const only = units.length === 1 && units[0]?.length === 1 ? units[0][0] : undefined;
      if (only) return [[(await query(only.sql, only.params)).rowCount ?? 0]];
      // Nothing was sent, or an ERROR (not FATAL) rolled the whole batch back: each unit is tried
      // alone, in order, so one unit's failure stays its own. Anything else may have committed: it fails the batch.
      const eachAlone = async (error: unknown) => {
        if (units.length === 1) throw error;
        const outcomes: UnitOutcome[] = [];
        for (const unit of units) outcomes.push(await executor.commit([unit]).then((outcome) => outcome[0] as UnitOutcome, asError));
        return outcomes;
      };
      const statements = units.flat();
      const preparedStatements = statements.map((statement) => preparedFor(statement.sql));
      let text: string;
      try {
        text = statements
          .map((statement, index) => executeText(statement, (preparedStatements[index] as PreparedStatement).name, pg.escapeLiteral))
          .join(';\n');
      } catch (error) {
        return eachAlone(error);
      }
      try {
        return changesByUnit(units, await runBatch(preparedStatements, text));
      } catch (error) {
        if (error instanceof pg.DatabaseError && error.severity === 'ERROR') return eachAlone(error);
        throw error;
      }
    },
    // Commits overlap on the server (and share its WAL flushes); meanwhile new writes gather for the next batch.
    groupCommit: { maxInFlight: Math.max(1, Math.min(4, maxConnections)), maxBatch: 256 },
    tail: listeningTail(pg, options.connectionString),
    async close() {
      if (!pool.ended) await pool.end();
    },
  };
  return executor;
}

/** The channel every replica's journal readers listen on; the payload names the journal. */
const JOURNAL_CHANNEL = 'aip_run_journal';
const LISTEN_RETRY_MIN_MS = 250;
const LISTEN_RETRY_MAX_MS = 5_000;

/**
 * Journal changes through LISTEN/NOTIFY: the NOTIFY is part of the change's transaction, so every
 * replica's readers hear of it once it commits. One dedicated connection listens, from the first
 * subscription to close(). It listens for 'error' for its whole life: a backend that ends under
 * it (a restart, pg_terminate_backend) costs a reconnect (250 ms doubling to 5 s), never the
 * process; after each (re)connect every reader reads again, since notifications sent in between were lost.
 */
function listeningTail(pg: PgModule, connectionString: string): JournalTail {
  const listeners = new TopicListeners();
  let client: PgClient | undefined;
  let connecting = false;
  let closed = false;
  let failures = 0;
  let retry: NodeJS.Timeout | undefined;
  const scheduleRetry = () => {
    if (closed || retry) return;
    const delay = Math.min(LISTEN_RETRY_MAX_MS, LISTEN_RETRY_MIN_MS * 2 ** failures);
    retry = setTimeout(() => {
      retry = undefined;
      connect();
    }, delay);
    retry.unref();
  };
  const lost = (broken: PgClient) => {
    if (client !== broken) return;
    client = undefined;
    broken.end().catch(() => undefined);
    failures++;
    scheduleRetry();
  };
  const connect = () => {
    if (closed || client || connecting) return;
    connecting = true;
    const candidate = new pg.Client({ connectionString });
    candidate.on('error', () => lost(candidate));
    candidate.on('end', () => lost(candidate));
    candidate.on('notification', (message) => {
      if (message.channel === JOURNAL_CHANNEL && message.payload) listeners.call(message.payload);
    });
    candidate
      .connect()
      .then(() => candidate.query(`LISTEN ${JOURNAL_CHANNEL}`))
      .then(
        () => {
          connecting = false;
          if (closed) return void candidate.end().catch(() => undefined);
          client = candidate;
          failures = 0;
          listeners.callAll();
        },
        () => {
          connecting = false;
          candidate.end().catch(() => undefined);
          failures++;
          scheduleRetry();
        },
      );
  };
  return {
    announce: (topic) => ({ sql: `SELECT pg_notify('${JOURNAL_CHANNEL}', ?)`, params: [topic] }),
    committed: () => undefined,
    subscribe(topic, onChange) {
      const unsubscribe = listeners.add(topic, onChange);
      connect();
      return unsubscribe;
    },
    async close() {
      closed = true;
      clearTimeout(retry);
      const listening = client;
      client = undefined;
      await listening?.end().catch(() => undefined);
    },
  };
}

/** A ledger statement as PostgreSQL knows it: its SQL PREPARE name, its protocol name, its `$n` text. */
interface PreparedStatement {
  name: string;
  protocolName: string;
  text: string;
}

interface PgModule {
  Pool: new (config: PoolConfig) => PgPool;
  Client: new (config: ClientConfig) => PgClient;
  DatabaseError: new (...args: never[]) => DatabaseError;
  escapeLiteral(value: string): string;
}

/**
 * `EXECUTE name(...)` of a prepared statement, its parameters written as literals: strings
 * through pg's escapeLiteral, numbers only when finite, anything else a TypeError. (A
 * multi-statement query goes through the simple protocol, which takes no parameters.)
 */
export function executeText({ params }: SqlStatement, name: string, escapeLiteral: (value: string) => string): string {
  const literal = (value: unknown): string => {
    if (value === null || value === undefined) return 'NULL';
    if (typeof value === 'string') return escapeLiteral(value);
    if (typeof value === 'number' && Number.isFinite(value)) return value < 0 ? `(${value})` : String(value);
    throw new TypeError(`a ledger parameter of type ${typeof value} cannot be written as a SQL literal`);
  };
  return params.length === 0 ? `EXECUTE ${name}` : `EXECUTE ${name}(${params.map(literal).join(', ')})`;
}

/** The rows each statement changed, unit by unit (one result per statement, in order). */
function changesByUnit(units: readonly SqlUnit[], answer: QueryResult<SqlRow> | QueryResult<SqlRow>[]): UnitOutcome[] {
  const results = Array.isArray(answer) ? answer : [answer];
  let next = 0;
  return units.map((unit) => unit.map(() => results[next++]?.rowCount ?? 0));
}

/** `?` placeholders as PostgreSQL's `$1, $2, …` (the ledger's SQL has no `?` inside literals). */
function numbered(sql: string): string {
  let index = 0;
  return sql.replace(/\?/g, () => `$${++index}`);
}
