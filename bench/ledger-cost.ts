/**
 * The ledger's cost (issue #17, part 2): `run_start` through the connector with the memory,
 * SQLite and PostgreSQL ledgers, sequentially and with 64 in flight, each start with a fresh
 * idempotency key (claim, provider call, settle with the run binding), against the same loopback server;
 * and the latency of an idempotent replay (answered from the ledger, no provider call). The
 * ledgers take turns in interleaved rounds and every ratio pairs a durable ledger with the
 * memory ledger of the same round. "Statements alone" times the ledger calls a start makes
 * (claim, then settle with the run binding) straight on the RunLedger, without HTTP: where a durable ledger
 * misses its target, this shows whether the database itself is the limit.
 *
 * PostgreSQL figures need HERMES_TEST_PG_URL (a fresh schema, dropped afterwards).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  createHermesConnector,
  createMemoryLedger,
  createPostgresLedger,
  createSqliteLedger,
  type HermesConnector,
  type RunLedger,
} from 'aip-connector-hermes-agent';
import { createPgSchemaOn, type PgSchema } from '../test/helpers/pg-schema.js';
import { ENDPOINT_ID } from './clients.js';
import { fullGc } from './heap.js';
import { startLedgerServer } from './ledger-server.js';
import { pairedFigure, type BenchSettings, type Figure, type Log, type SectionResult } from './report.js';
import { BENCH_API_KEY } from './servers.js';
import { interleave, quantile } from './stats.js';

export const LEDGER_CONCURRENCY = 64;
const START_CAPABILITY = `cap:hermes_agent:${ENDPOINT_ID}:run_start`;
const TARGETS = { sqlite: 0.7, postgres: 0.5 } as const;

type LedgerName = 'memory' | 'sqlite' | 'postgres';

interface Contender {
  name: LedgerName;
  ledger: RunLedger;
  connector: HermesConnector;
}

interface Measured {
  per_s: number;
  p50_us: number;
}

let counter = 0;
const nextKey = () => `bench-${process.pid}-${++counter}`;

/** `calls` calls of `call` with `concurrency` in flight; throughput and median latency. */
async function measure(call: () => Promise<void>, calls: number, concurrency: number): Promise<Measured> {
  const latencies: number[] = [];
  let next = 0;
  const worker = async () => {
    while (next++ < calls) {
      const started = performance.now();
      await call();
      latencies.push((performance.now() - started) * 1000);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { per_s: calls / ((performance.now() - started) / 1000), p50_us: quantile(latencies, 0.5) };
}

function freshStart(connector: HermesConnector): () => Promise<void> {
  return async () => {
    const key = nextKey();
    const result = await connector.invoke({ id: `act_${key}`, capability_id: START_CAPABILITY, input: { body: { input: 'bench' } }, idempotency_key: key });
    if (result.status !== 'completed') throw new Error(`run_start did not complete: ${result.error?.code ?? result.status}`);
  };
}

function replayOf(connector: HermesConnector, key: string): () => Promise<void> {
  return async () => {
    const result = await connector.invoke({
      id: `act_${nextKey()}`,
      capability_id: START_CAPABILITY,
      input: { body: { input: 'bench' } },
      idempotency_key: key,
    });
    if (result.receipt?.replayed !== true) throw new Error('the replay was not answered from the ledger');
  };
}

/** The ledger calls one fresh start makes, straight on the ledger. */
function statementsAlone(ledger: RunLedger): () => Promise<void> {
  return async () => {
    const key = nextKey();
    const now = Date.now();
    const scope = { capability_id: START_CAPABILITY, idempotency_key: key };
    const claim = await ledger.claim({
      ...scope,
      fingerprint: 'f',
      action_id: key,
      owner: 'bench',
      now,
      lease_expires_at: now + 30_000,
      expires_at: now + 86_400_000,
    });
    if (!claim.claimed) throw new Error('a fresh key was not claimed');
    await ledger.settle(scope, 'bench', { action_id: key, status: 'completed', output: { run_id: 'run_bench', status: 'started' } } as never, {
      bind: {
        action_id: key,
        capability_id: START_CAPABILITY,
        endpoint_id: ENDPOINT_ID,
        tenant_id: null,
        run_id: `run_${key}`,
        session_id: 'bench',
        credential_revision: null,
        created_at: now,
        updated_at: now,
        last_status: 'started',
        terminal_event: null,
        evidence_lost: false,
      },
    });
  };
}

async function openContenders(origin: string, log: Log): Promise<{ contenders: Contender[]; cleanup: () => Promise<void>; note: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'aip-bench-ledger-'));
  const pgUrl = process.env.HERMES_TEST_PG_URL;
  const schema: PgSchema | undefined = pgUrl ? await createPgSchemaOn(pgUrl, 'aip_bench') : undefined;
  const ledgers: Array<[LedgerName, RunLedger]> = [
    ['memory', createMemoryLedger()],
    ['sqlite', createSqliteLedger({ path: join(dir, 'ledger.db') })],
  ];
  if (schema) ledgers.push(['postgres', createPostgresLedger({ connectionString: schema.connectionString })]);
  const note = schema ? 'PostgreSQL: a fresh schema on HERMES_TEST_PG_URL' : 'PostgreSQL figures skipped: HERMES_TEST_PG_URL is not set';
  log(`  ${note}`);
  const contenders = ledgers.map(([name, ledger]) => ({
    name,
    ledger,
    connector: createHermesConnector({ endpoints: [{ id: ENDPOINT_ID, baseUrl: origin, apiKey: BENCH_API_KEY }], ledger }),
  }));
  return {
    contenders,
    note,
    async cleanup() {
      for (const contender of contenders) {
        await contender.connector.close();
        await contender.ledger.close();
      }
      await schema?.drop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Interleaved rounds of `make(contender)` for every ledger; per-round results by ledger. */
async function rounds(contenders: Contender[], settings: BenchSettings, slices: number, run: (contender: Contender) => Promise<Measured>) {
  const merge = (parts: Measured[]): Measured => ({
    per_s: parts.reduce((sum, part) => sum + part.per_s, 0) / parts.length,
    p50_us: quantile(
      parts.map((part) => part.p50_us),
      0.5,
    ),
  });
  const entries = contenders.map((contender) => [contender.name, () => run(contender)] as const);
  return interleave<Measured, LedgerName>(Object.fromEntries(entries) as Record<LedgerName, () => Promise<Measured>>, {
    rounds: settings.rounds,
    warmupRounds: settings.warmupRounds,
    slices,
    merge,
    beforeRound: () => fullGc(1),
  });
}

export async function benchLedgerCost(settings: BenchSettings, log: Log): Promise<SectionResult> {
  const server = await startLedgerServer();
  const { contenders, cleanup, note } = await openContenders(server.origin, log);
  const plan = settings.quick ? { slices: 3, sequential: 150, concurrent: 600 } : { slices: 4, sequential: 300, concurrent: 1500 };
  try {
    for (const contender of contenders) await measure(freshStart(contender.connector), 1000, LEDGER_CONCURRENCY);
    log(
      `  run_start, concurrency 1 and ${LEDGER_CONCURRENCY}: ${settings.rounds} rounds x ${plan.slices} slices, ledgers ${contenders.map((c) => c.name).join(', ')}`,
    );
    const sequential = await rounds(contenders, settings, plan.slices, (c) => measure(freshStart(c.connector), plan.sequential, 1));
    const concurrent = await rounds(contenders, settings, plan.slices, (c) => measure(freshStart(c.connector), plan.concurrent, LEDGER_CONCURRENCY));
    const replayKeys = new Map(contenders.map((c) => [c.name, nextKey()]));
    for (const c of contenders) await replayOf(c.connector, replayKeys.get(c.name) as string)().catch(() => undefined);
    const replays = await rounds(contenders, settings, plan.slices, (c) =>
      measure(replayOf(c.connector, replayKeys.get(c.name) as string), plan.sequential, 1),
    );
    const alone = await rounds(contenders, settings, plan.slices, (c) => measure(statementsAlone(c.ledger), plan.concurrent, LEDGER_CONCURRENCY));

    const of = (result: typeof sequential, name: LedgerName, key: keyof Measured) => result.rounds[name].map((round) => round[key]);
    const figures: Figure[] = [];
    for (const { name } of contenders.filter((c) => c.name !== 'memory')) {
      const durable = name as 'sqlite' | 'postgres';
      const ratioLabel = `${name} / memory ledger, same round`;
      figures.push(
        pairedFigure(
          {
            id: `ledger.${name}_throughput_64`,
            label: `run_start throughput, concurrency ${LEDGER_CONCURRENCY}, ${name} vs memory`,
            unit: 'req/s',
            ratioLabel,
            target: { op: '>=', value: TARGETS[durable], judgedOn: 'median' },
          },
          of(concurrent, 'memory', 'per_s'),
          of(concurrent, durable, 'per_s'),
        ),
        pairedFigure(
          { id: `ledger.${name}_throughput_1`, label: `run_start throughput, sequential, ${name} vs memory`, unit: 'req/s', ratioLabel },
          of(sequential, 'memory', 'per_s'),
          of(sequential, durable, 'per_s'),
        ),
        pairedFigure(
          { id: `ledger.${name}_replay_p50`, label: `idempotent replay p50 latency, ${name} vs memory`, unit: 'us', ratioLabel },
          of(replays, 'memory', 'p50_us'),
          of(replays, durable, 'p50_us'),
        ),
        pairedFigure(
          {
            id: `ledger.${name}_statements_alone_64`,
            label: `ledger calls of one start alone (no HTTP), concurrency ${LEDGER_CONCURRENCY}, ${name} vs memory`,
            unit: 'req/s',
            ratioLabel,
          },
          of(alone, 'memory', 'per_s'),
          of(alone, durable, 'per_s'),
        ),
      );
    }
    return {
      id: 'ledger_cost',
      title: 'Ledger cost (run_start)',
      config: {
        ledgers: contenders.map((c) => c.name),
        concurrency: LEDGER_CONCURRENCY,
        slices_per_round: plan.slices,
        sequential_calls_per_slice: plan.sequential,
        concurrent_calls_per_slice: plan.concurrent,
        note,
      },
      figures,
      rounds: [
        ...sequential.records.map((record) => ({ mode: 'run_start_sequential', ...record })),
        ...concurrent.records.map((record) => ({ mode: `run_start_concurrency_${LEDGER_CONCURRENCY}`, ...record })),
        ...replays.records.map((record) => ({ mode: 'replay_sequential', ...record })),
        ...alone.records.map((record) => ({ mode: 'statements_alone', ...record })),
      ],
      errors: [],
    };
  } finally {
    await cleanup();
    await server.close();
  }
}
