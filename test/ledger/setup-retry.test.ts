/**
 * A SQL ledger whose schema set-up fails (the database is down at first use) must recover by
 * itself once the database is back: `ledger_unavailable` is temporary, as documented.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { connectPg } from '../helpers/pg-schema.js';
import { createPostgresLedger } from 'aip-connector-hermes-agent';
import { createSqlLedger, type SqlExecutor } from '../../src/ledger/sql-ledger.js';
import type { SqlUnit } from '../../src/ledger/group-commit.js';
import { inProcessTail } from '../../src/ledger/journal-tail.js';
import { eventually, harnessFactory, nextId } from '../helpers/harness.js';
import { PG_URL, createPgSchema } from '../helpers/ledgers.js';

const harness = harnessFactory();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** An executor whose migrate() fails `failures` times, then succeeds; counts its calls. */
function flakyExecutor(failures: number): SqlExecutor & { migrations: number } {
  const executor = {
    migrations: 0,
    async migrate() {
      executor.migrations++;
      await sleep(5);
      if (executor.migrations <= failures) throw new Error('connect ECONNREFUSED');
    },
    all: async () => [],
    commit: async (units: readonly SqlUnit[]) => units.map((unit) => unit.map(() => 1)),
    groupCommit: { maxInFlight: 1, maxBatch: 16 },
    tail: inProcessTail(':flaky'),
    close: async () => undefined,
  };
  return executor;
}

describe('schema set-up retry', () => {
  it('concurrent first calls share one attempt; calls during the pause fail at once; a later call sets up and succeeds', async () => {
    const executor = flakyExecutor(1);
    const ledger = createSqlLedger('flaky', executor);
    const first = await Promise.allSettled(Array.from({ length: 5 }, () => ledger.openRuns()));
    expect(first.every((outcome) => outcome.status === 'rejected')).toBe(true);
    expect(executor.migrations).toBe(1);

    await expect(ledger.openRuns()).rejects.toThrow('ECONNREFUSED');
    expect(executor.migrations).toBe(1);

    await sleep(300);
    await expect(ledger.openRuns()).resolves.toEqual([]);
    expect(executor.migrations).toBe(2);
    await ledger.openRuns();
    expect(executor.migrations).toBe(2);
  });

  it('attempts are spaced further apart after each failure (bounded)', async () => {
    const executor = flakyExecutor(3);
    const ledger = createSqlLedger('flaky', executor);
    await expect(ledger.openRuns()).rejects.toThrow();
    await sleep(300);
    await expect(ledger.openRuns()).rejects.toThrow();
    expect(executor.migrations).toBe(2);
    // The second pause is 500 ms: at 300 ms no new attempt is made.
    await sleep(300);
    await expect(ledger.openRuns()).rejects.toThrow();
    expect(executor.migrations).toBe(2);
    await sleep(300);
    await expect(ledger.openRuns()).rejects.toThrow();
    expect(executor.migrations).toBe(3);
  });
});

const proxies: Server[] = [];
afterEach(async () => {
  for (const proxy of proxies.splice(0)) await new Promise((resolve) => proxy.close(resolve));
});

/** A TCP forwarder on `port` to the PostgreSQL server: "the database is back". */
async function forward(port: number, target: URL): Promise<void> {
  const sockets = new Set<Socket>();
  const proxy = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => sockets.delete(socket));
    }
    client.pipe(upstream).pipe(client);
  });
  const close = proxy.close.bind(proxy);
  proxy.close = ((callback?: (error?: Error) => void) => {
    for (const socket of sockets) socket.destroy();
    return close(callback);
  }) as typeof proxy.close;
  await new Promise<void>((resolve) => proxy.listen(port, '127.0.0.1', resolve));
  proxies.push(proxy);
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

describe.runIf(PG_URL)('a PostgreSQL ledger that was unreachable at first use', () => {
  it('answers ledger_unavailable (nothing sent), then recovers by itself once PostgreSQL is reachable', async () => {
    const { connectionString, drop } = await createPgSchema('aip_retry');
    try {
      const port = await freePort();
      const behindProxy = new URL(connectionString);
      behindProxy.hostname = '127.0.0.1';
      behindProxy.port = String(port);
      const ledger = createPostgresLedger({ connectionString: behindProxy.toString() });
      const h = await harness({ connector: { ledger } });
      const start = () => h.invoke({ capability_id: h.cap('run_start'), input: { body: { input: 'hi' } }, idempotency_key: nextId('key') });

      const down = await start();
      expect(down.error).toMatchObject({ code: 'connector.hermes_agent.ledger_unavailable', retryable: true });
      await expect(h.connector.evidence(down.action_id)).rejects.toThrow();
      expect(h.sim.requests).toHaveLength(0);

      await forward(port, new URL(connectionString));
      const up = await eventually(async () => {
        const result = await start();
        return result.status === 'completed' ? result : undefined;
      }, 'a start once PostgreSQL is back');
      expect(await h.connector.evidence(up.action_id)).toMatchObject({ action_id: up.action_id });
      expect(h.sim.startCount()).toBe(1);
      await ledger.close();
    } finally {
      await drop();
    }
  });
});

describe.runIf(PG_URL)('a PostgreSQL backend ended during the schema set-up', () => {
  it('fails that set-up (no unhandled error event, no crash) and the next one succeeds', async () => {
    const { connectionString, drop } = await createPgSchema('aip_kill_setup');
    const application = `aip_kill_${process.pid}`;
    const url = new URL(connectionString);
    url.searchParams.set('application_name', application);
    // Another session holds the migration lock, so the ledger's set-up waits inside its transaction.
    const holder = await connectPg(connectionString);
    const admin = await connectPg(connectionString);
    const ledger = createPostgresLedger({ connectionString: url.toString() });
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock($1)', [0x41495048]);
      // Settled into a value at once: its rejection may arrive before the terminate's answer, and an
      // unobserved rejection in between is an unhandled one.
      const setUp = ledger.openRuns().then(
        () => undefined,
        (error: unknown) => error,
      );
      await eventually(async () => {
        const waiting = await admin.query("SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", [application]);
        return waiting.rowCount === 1 || undefined;
      }, 'the set-up waiting for the migration lock');
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [application]);
      expect(await setUp).toBeInstanceOf(Error);
      await holder.query('COMMIT');
      await sleep(300);
      await expect(ledger.openRuns()).resolves.toEqual([]);
    } finally {
      await ledger.close();
      await holder.end();
      await admin.end();
      await drop();
    }
  });
});
