/**
 * PostgreSQL backends ended under a busy ledger (issue 22, item 1): a failover, a DBA's
 * pg_terminate_backend or a pooler recycling a connection must fail the calls in flight with
 * `ledger_unavailable`, never crash the host with an unhandled 'error' event from a pg client.
 *
 * A child process runs a connector on a PostgreSQL ledger, busy with concurrent lifecycles and
 * reconcile() (fixtures/busy-postgres-ledger.mjs). This process ends the child's backends at
 * chosen moments, each made to last by holding a lock the child's statement waits for: during
 * the schema migration, a prepared-statement set-up, a group-commit batch (its EXECUTEs wait
 * for rows, not tables), a reconcile(), and while the pool's clients sit idle; and in storms of ends at random instants (seeded),
 * hundreds of them. Rounds go on until every moment was hit and enough storm shots were fired,
 * within a bound. The child must live through it all, and recover by itself.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createPostgresLedger } from 'aip-connector-hermes-agent';
import { eventually } from '../helpers/harness.js';
import { PG_URL, createPgSchema } from '../helpers/ledgers.js';
import { startCoalescingProxy } from '../helpers/pg-coalescing-proxy.js';
import { connectPg } from '../helpers/pg-schema.js';
import { seededRandom } from '../helpers/seeded-random.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/busy-postgres-ledger.mjs', import.meta.url));
/** The ledger's migration advisory lock (src/ledger/postgres.ts). */
const MIGRATION_LOCK = 0x41495048;
const MIGRATION_ENDS = 2;
const MIN_STORM_SHOTS = 300;
const SHOTS_PER_STORM = 25;
const MAX_SHOT_GAP_MS = 30;
const MAX_ROUNDS = 40;
/** Hang guards, not timing assertions: a moment not seen within this is missed for the round. */
const MOMENT_WAIT_MS = 5_000;
const STORM_BOUND_MS = 150_000;

type Moment = 'migration' | 'prepare' | 'batch' | 'reconcile' | 'idle';
/** Moments made to last: this session takes `lock`, and the child's backend `waiting` for it is ended there. */
const LOCKED: Record<'prepare' | 'batch' | 'reconcile', { lock: string; waiting: (backend: Backend, application: string) => boolean }> = {
  prepare: { lock: 'LOCK TABLE idempotency_records IN ACCESS EXCLUSIVE MODE', waiting: (backend) => backend.query.startsWith('PREPARE ') },
  batch: { lock: "SELECT 1 FROM idempotency_records WHERE state = 'in_flight' FOR UPDATE", waiting: (backend) => backend.query.startsWith('EXECUTE ') },
  reconcile: {
    lock: 'LOCK TABLE run_bindings IN ACCESS EXCLUSIVE MODE',
    waiting: (backend, application) => backend.application_name === `${application}_reconcile`,
  },
};
const ROUND_MOMENTS = ['prepare', 'batch', 'reconcile', 'idle'] as const;

interface Backend {
  pid: number;
  application_name: string;
  state: string | null;
  wait_event_type: string | null;
  query: string;
}

interface Report {
  t: 'report';
  outcomes: Record<string, Record<string, number>>;
  recoveredAfterMs: number | null;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The busy child, with its messages and the tail of its stderr. */
function startChild(connectionString: string, application: string) {
  const child: ChildProcess = fork(FIXTURE, [], {
    env: { ...process.env, LEDGER_PG_URL: connectionString, APPLICATION: application },
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString('utf8')).slice(-4000)));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const message = <T extends { t: string }>(t: T['t']) =>
    new Promise<T>((resolve, reject) => {
      const onMessage = (received: { t: string }) => {
        if (received.t !== t) return;
        child.off('message', onMessage);
        resolve(received as T);
      };
      child.on('message', onMessage);
      void exit.then(() => reject(new Error(`the child ended before '${t}': ${stderr}`)));
    });
  return { child, exit, message, stderr: () => stderr, alive: () => child.exitCode === null && child.signalCode === null };
}

/** The backends of the child's pools, and ending them. */
function backendsOf(admin: pg.Client, application: string) {
  const list = async () =>
    (
      await admin.query<Backend>('SELECT pid, application_name, state, wait_event_type, query FROM pg_stat_activity WHERE application_name = ANY($1)', [
        [application, `${application}_reconcile`],
      ])
    ).rows;
  /** Ends them and waits until they are gone, so that no later moment counts a dying backend; resolves with how many. */
  const end = async (backends: Backend[]) => {
    const pids = backends.map((backend) => backend.pid);
    const ended = await admin.query('SELECT pg_terminate_backend(pid) AS ended FROM unnest($1::int[]) AS pid', [pids]);
    await eventually(async () => (await admin.query('SELECT 1 FROM pg_stat_activity WHERE pid = ANY($1)', [pids])).rowCount === 0, 'the ended backends gone');
    return ended.rows.filter((row) => row.ended === true).length;
  };
  /** Ends the backends `matching` picks, as soon as there are some (bounded); false when none came. */
  const endWhen = async (matching: (backends: Backend[]) => Backend[]): Promise<boolean> => {
    const deadline = Date.now() + MOMENT_WAIT_MS;
    while (Date.now() < deadline) {
      const chosen = matching(await list());
      if (chosen.length > 0) return (await end(chosen)) > 0;
      await sleep(2);
    }
    return false;
  };
  /** Ends the backends waiting for a lock in a statement that `waiting` recognises. */
  const endWaiting = (waiting: (backend: Backend, application: string) => boolean) =>
    endWhen((backends) => backends.filter((backend) => backend.wait_event_type === 'Lock' && waiting(backend, application)));
  return { list, end, endWhen, endWaiting };
}

type Child = ReturnType<typeof startChild>;
type Backends = ReturnType<typeof backendsOf>;

/** Ends the backends of the child's schema migration while `locker` holds its lock, then lets it through. */
async function migrationMoments(locker: pg.Client, backends: Backends, start: () => Promise<Child>): Promise<{ child: Child; hits: number }> {
  await locker.query('BEGIN');
  await locker.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
  let hits = 0;
  try {
    const child = await start();
    for (let end = 0; end < MIGRATION_ENDS; end++) if (await backends.endWaiting((backend) => backend.query.includes('pg_advisory_xact_lock'))) hits++;
    return { child, hits };
  } finally {
    await locker.query('COMMIT');
  }
}

/** SQLSTATE 40P01. */
const DEADLOCK_DETECTED = '40P01';

/** The moments of a round, and the storms between them. */
function moments(locker: pg.Client, backends: Backends, child: Child) {
  const random = seededRandom(22);
  const fired = { shots: 0, ended: 0 };
  return {
    fired,
    async locked(moment: keyof typeof LOCKED): Promise<boolean> {
      await locker.query('BEGIN');
      try {
        // The locker can be chosen as the victim of a deadlock with the child's own transaction: then this moment did not happen.
        const locked = await locker.query(LOCKED[moment].lock).then(
          () => true,
          (error: { code?: string }) => {
            if (error.code === DEADLOCK_DETECTED) return false;
            throw error;
          },
        );
        return locked && (await backends.endWaiting(LOCKED[moment].waiting));
      } finally {
        await locker.query('ROLLBACK');
      }
    },
    /** The child starts nothing, its calls end, its pools' clients sit idle: they are ended there. */
    async idle(): Promise<boolean> {
      child.child.send('quiet');
      await child.message('quiet');
      try {
        return await backends.endWhen((all) => (all.length > 0 && all.every((backend) => backend.state === 'idle') ? all : []));
      } finally {
        child.child.send('busy');
      }
    },
    /** Every backend of the child ended, again and again, at seeded random instants. */
    async storm(): Promise<void> {
      for (let shot = 0; shot < SHOTS_PER_STORM && child.alive(); shot++) {
        await sleep(random() * MAX_SHOT_GAP_MS);
        fired.ended += await backends.end(await backends.list());
        fired.shots++;
      }
    },
  };
}

/** The outcomes that are neither a success nor the connector's typed refusal. */
function unexpectedOutcomes(outcomes: Report['outcomes']): string[] {
  const allowed: Record<string, string[]> = {
    run_start: ['ok', 'ledger_unavailable'],
    run_status: ['ok', 'ledger_unavailable'],
    reconcile: ['ok', 'rejected'],
  };
  return Object.entries(outcomes).flatMap(([operation, codes]) =>
    Object.entries(codes)
      .filter(([code]) => !allowed[operation]?.includes(code))
      .map(([code, count]) => `${operation}: ${code} x${count}`),
  );
}

describe.runIf(PG_URL)('PostgreSQL backends ended under a busy ledger', () => {
  const cleanups: Array<() => Promise<unknown>> = [];
  afterAll(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('at every moment, hundreds of times: the process never crashes, calls end ledger_unavailable or succeed, and it recovers by itself', {
    timeout: STORM_BOUND_MS + 60_000,
  }, async () => {
    const schema = await createPgSchema('aip_terminated');
    cleanups.push(schema.drop);
    const application = `aip_terminated_${process.pid}`;
    const admin = await connectPg(schema.connectionString);
    const locker = await connectPg(schema.connectionString);
    cleanups.push(
      () => admin.end(),
      () => locker.end(),
    );
    const backends = backendsOf(admin, application);
    const hits: Record<Moment, number> = { migration: 0, prepare: 0, batch: 0, reconcile: 0, idle: 0 };

    const { child, hits: migrationHits } = await migrationMoments(locker, backends, async () => {
      const started = startChild(schema.connectionString, application);
      cleanups.push(async () => {
        if (started.alive()) started.child.kill('SIGKILL');
        await started.exit;
      });
      await started.message('ready');
      return started;
    });
    hits.migration = migrationHits;
    const migrated = async () => (await admin.query("SELECT to_regclass('run_bindings') IS NOT NULL AS done")).rows[0]?.done === true;
    await eventually(migrated, 'the migration, retried by itself', 1000);

    const moment = moments(locker, backends, child);
    const started = Date.now();
    const done = () => moment.fired.shots >= MIN_STORM_SHOTS && Object.values(hits).every((count) => count > 0);
    for (let round = 0; round < MAX_ROUNDS && !done() && child.alive() && Date.now() - started < STORM_BOUND_MS; round++) {
      const kind = ROUND_MOMENTS[round % ROUND_MOMENTS.length] as (typeof ROUND_MOMENTS)[number];
      if (await (kind === 'idle' ? moment.idle() : moment.locked(kind))) hits[kind]++;
      await moment.storm();
    }

    if (child.alive()) child.child.send('finish');
    const report = await child.message<Report>('report').catch((error: Error) => error);
    const exit = await child.exit;
    const summary = JSON.stringify({ hits, ...moment.fired, report: report instanceof Error ? report.message : report });
    expect(exit, `${summary}\n${child.stderr()}`).toEqual({ code: 0, signal: null });
    const { outcomes, recoveredAfterMs } = report as Report;
    expect(unexpectedOutcomes(outcomes), summary).toEqual([]);
    expect(outcomes.run_start?.ledger_unavailable ?? 0, summary).toBeGreaterThan(0);
    expect(outcomes.run_start?.ok ?? 0, summary).toBeGreaterThan(0);
    expect(hits.migration, summary).toBe(MIGRATION_ENDS);
    for (const kind of ROUND_MOMENTS) expect(hits[kind], `${kind}: ${summary}`).toBeGreaterThan(0);
    expect(moment.fired.shots, summary).toBeGreaterThanOrEqual(MIN_STORM_SHOTS);
    expect(recoveredAfterMs, summary).not.toBeNull();
  });

  // The exact moment the storm above finds by chance: pg-pool hands a new client to the waiting
  // pool.connect() when its ReadyForQuery is parsed, and the backend's FATAL in the same read is
  // emitted before the code that awaited the checkout has run a line.
  it('a backend ended in the same read as the ReadyForQuery that hands its client over: the call fails, nothing is unhandled, the next call succeeds', async () => {
    const schema = await createPgSchema('aip_checkout_gap');
    cleanups.push(schema.drop);
    const admin = await connectPg(schema.connectionString);
    cleanups.push(() => admin.end());
    const server = new URL(schema.connectionString);
    const proxy = await startCoalescingProxy({ host: server.hostname, port: Number(server.port || 5432) }, (pid) =>
      admin.query('SELECT pg_terminate_backend($1)', [pid]),
    );
    cleanups.push(proxy.close);
    const uncaught: unknown[] = [];
    const record = (error: unknown) => uncaught.push(error);
    process.on('uncaughtException', record);
    cleanups.push(async () => process.off('uncaughtException', record));
    const throughProxy = new URL(schema.connectionString);
    throughProxy.port = String(proxy.port);
    const ledger = createPostgresLedger({ connectionString: throughProxy.toString() });
    cleanups.push(() => ledger.close());

    await expect(ledger.openRuns()).rejects.toThrow();
    const oneRead = await proxy.coalesced();
    expect(oneRead[0]).toBe(0x5a); // ReadyForQuery, then the FATAL
    expect(oneRead.toString('latin1')).toContain('57P01');
    expect(uncaught.map(String)).toEqual([]);
    await eventually(
      () =>
        ledger.openRuns().then(
          (runs) => runs.length === 0,
          () => false,
        ),
      'the schema set-up retried by itself',
    );
  });
});
