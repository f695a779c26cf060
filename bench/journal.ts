/**
 * The run event journal (issue 26): journal on against journal off, in interleaved rounds, on the
 * simulator in this process and a SQLite ledger (PostgreSQL too with HERMES_TEST_PG_URL).
 * - One stream: run_start, then run_events of a run of 2,000 deltas; off reads Hermes, on
 *   reads the journal the follower fills. Milliseconds from the start to the result.
 * - Many runs followed at once: 1,000 runs started together (64 in flight), then each read once
 *   with run_events (off: from Hermes; on: from the journal, every run followed at once). CPU of this
 *   process per run, heap held per run once every run is started (the followers in flight, after a
 *   full GC), and journal appends per event (each append is one group-commit unit; units of
 *   concurrent runs share transactions).
 * Both sides drain every run's stream once; the simulator's own cost is in both.
 */
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createHermesConnector, createPostgresLedger, createSqliteLedger, type HermesConnector, type RunLedger } from 'aip-connector-hermes-agent';
import type { HermesSimulator } from 'aip-connector-hermes-agent/simulator';
import { journalStoreOf, JOURNAL_STORE, type JournalStore } from '../src/journal/types.js';
import { createPgSchemaOn, type PgSchema } from '../test/helpers/pg-schema.js';
import { fullGc } from './heap.js';
import { pairedFigure, type BenchSettings, type Figure, type Log, type SectionResult } from './report.js';
import { BENCH_API_KEY } from './servers.js';
import { durableBackendsSection } from './ledger-backends.js';
import { cpuMicros, interleave, summarize } from './stats.js';

const ENDPOINT = 'bench';
/**
 * streamDeltas: the long stream's deltas; fanoutRuns: runs followed at once (a fifth with --quick),
 * each of fanoutDeltas deltas; startConcurrency: run_start calls in flight while they are started.
 */
const SIZES = { streamDeltas: 2000, fanoutRuns: 1000, fanoutDeltas: 10, startConcurrency: 64 } as const;

interface Side {
  connector: HermesConnector;
  /** Journal appends counted (on), or undefined (off). */
  appends?: { calls: number; events: number };
}

interface FanoutRound {
  cpu_us_per_run: number;
  heap_bytes_per_run: number;
  appends_per_event: number | undefined;
}

let counter = 0;
const key = () => `bench-journal-${process.pid}-${++counter}`;
export const deltas = (count: number) => [
  ...Array.from({ length: count }, (_, index) => ({ type: 'delta', text: `d${index} ` })),
  { type: 'complete', output: 'done' },
];

/** The ledger, with its journal store counting appends: what the follower writes per event. */
function countingLedger(ledger: RunLedger, appends: { calls: number; events: number }): RunLedger {
  const store = journalStoreOf(ledger) as JournalStore;
  const counted: JournalStore = Object.create(store);
  counted.append = (journalKey, owner, append) => {
    appends.calls++;
    appends.events += append.entries.length;
    return store.append(journalKey, owner, append);
  };
  return Object.assign(Object.create(ledger) as RunLedger, { [JOURNAL_STORE]: counted });
}

export async function startRun(connector: HermesConnector, script: unknown[]): Promise<string> {
  const result = await connector.invoke({
    id: `act_${key()}`,
    capability_id: `cap:hermes_agent:${ENDPOINT}:run_start`,
    input: { body: { input: 'bench', sim_script: script } },
    idempotency_key: key(),
  });
  if (result.status !== 'completed') throw new Error(`run_start did not complete: ${result.error?.code ?? result.status}`);
  return (result.output as { run_id: string }).run_id;
}

/** Reads the run to its end; it must end completed with more events than its deltas (Hermes adds events of its own). */
async function readRun(connector: HermesConnector, runId: string, deltaCount: number): Promise<void> {
  const result = await connector.invoke({
    id: `act_${key()}`,
    capability_id: `cap:hermes_agent:${ENDPOINT}:run_events`,
    input: { run_id: runId, max_events: 100_000 },
  });
  const got = (result.output as { events?: unknown[] } | undefined)?.events?.length ?? 0;
  if (result.status !== 'completed' || got <= deltaCount)
    throw new Error(`run_events: ${result.status} ${result.error?.code ?? ''} with ${got} events for ${deltaCount} deltas`);
}

async function oneStream(side: Side): Promise<number> {
  const started = performance.now();
  await readRun(side.connector, await startRun(side.connector, deltas(SIZES.streamDeltas)), SIZES.streamDeltas);
  return performance.now() - started;
}

async function fanout(side: Side, runs: number): Promise<FanoutRound> {
  fullGc();
  const heapBefore = process.memoryUsage().heapUsed;
  const appendsBefore = side.appends && { ...side.appends };
  const cpuBefore = process.cpuUsage();
  const runIds: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: SIZES.startConcurrency }, async () => {
      while (next++ < runs) runIds.push(await startRun(side.connector, deltas(SIZES.fanoutDeltas)));
    }),
  );
  fullGc();
  const heapHeld = process.memoryUsage().heapUsed - heapBefore;
  await Promise.all(runIds.map((runId) => readRun(side.connector, runId, SIZES.fanoutDeltas)));
  const cpu = cpuMicros(cpuBefore);
  const appended = side.appends && appendsBefore && { calls: side.appends.calls - appendsBefore.calls, events: side.appends.events - appendsBefore.events };
  return {
    cpu_us_per_run: cpu / runs,
    heap_bytes_per_run: heapHeld / runs,
    appends_per_event: appended && appended.events > 0 ? appended.calls / appended.events : undefined,
  };
}

async function openLedger(name: 'sqlite' | 'postgres', dir: string, schema: PgSchema | undefined): Promise<RunLedger> {
  return name === 'sqlite'
    ? createSqliteLedger({ path: join(dir, 'journal.db') })
    : createPostgresLedger({ connectionString: (schema as PgSchema).connectionString });
}

async function benchBackend(
  name: 'sqlite' | 'postgres',
  sim: HermesSimulator,
  settings: BenchSettings,
  log: Log,
  dir: string,
): Promise<{ figures: Figure[]; rounds: unknown[] }> {
  const schema = name === 'postgres' ? await createPgSchemaOn(process.env.HERMES_TEST_PG_URL as string, 'aip_bench_journal') : undefined;
  const ledgers = [await openLedger(name, dir, schema), await openLedger(name, dir, schema)] as [RunLedger, RunLedger];
  const appends = { calls: 0, events: 0 };
  const endpoints = [{ id: ENDPOINT, baseUrl: sim.url, apiKey: BENCH_API_KEY }];
  const off: Side = { connector: createHermesConnector({ endpoints, ledger: ledgers[0] }) };
  const on: Side = {
    connector: createHermesConnector({ endpoints, ledger: countingLedger(ledgers[1], appends), journal: { followersPerEndpoint: SIZES.fanoutRuns } }),
    appends,
  };
  const runs = settings.quick ? SIZES.fanoutRuns / 5 : SIZES.fanoutRuns;
  try {
    log(`  ${name}: one stream of ${SIZES.streamDeltas} deltas, journal off and on`);
    const stream = await interleave({ off: () => oneStream(off), on: () => oneStream(on) }, settings);
    log(`  ${name}: ${runs} runs followed at once, journal off and on`);
    const many = await interleave(
      { off: () => fanout(off, runs), on: () => fanout(on, runs) },
      { ...settings, rounds: Math.max(3, Math.ceil(settings.rounds / 2)) },
    );
    const perEvent = many.rounds.on.map((round) => round.appends_per_event).filter((value): value is number => value !== undefined);
    const figures: Figure[] = [
      pairedFigure(
        { id: `journal_stream_${name}`, label: `${name}: start + run_events of ${SIZES.streamDeltas} deltas`, unit: 'ms', ratioLabel: 'journal on / off' },
        stream.rounds.off,
        stream.rounds.on,
      ),
      pairedFigure(
        { id: `journal_fanout_cpu_${name}`, label: `${name}: CPU per run, ${runs} runs at once`, unit: 'us', ratioLabel: 'journal on / off' },
        many.rounds.off.map((round) => round.cpu_us_per_run),
        many.rounds.on.map((round) => round.cpu_us_per_run),
      ),
      {
        id: `journal_fanout_heap_${name}`,
        label: `${name}: heap per run while ${runs} are followed (off: queued in Hermes)`,
        unit: 'KiB',
        bare: summarize(many.rounds.off.map((round) => round.heap_bytes_per_run / 1024)),
        connector: summarize(many.rounds.on.map((round) => round.heap_bytes_per_run / 1024)),
      },
      {
        id: `journal_appends_per_event_${name}`,
        label: `${name}: journal appends per event`,
        unit: '',
        ratio: summarize(perEvent),
        ratioLabel: 'appends / events',
      },
    ];
    return { figures, rounds: [...stream.records, ...many.records].map((record) => ({ backend: name, ...record })) };
  } finally {
    await off.connector.close();
    await on.connector.close();
    for (const ledger of ledgers) await ledger.close();
    await schema?.drop();
  }
}

export function benchJournal(settings: BenchSettings, log: Log): Promise<SectionResult> {
  const config = {
    stream_deltas: SIZES.streamDeltas,
    fanout_runs: settings.quick ? SIZES.fanoutRuns / 5 : SIZES.fanoutRuns,
    fanout_deltas: SIZES.fanoutDeltas,
  };
  return durableBackendsSection({ id: 'journal', title: 'Run event journal', config }, 'aip-bench-journal-', { streamLookupMs: 2000 }, (backend, sim, dir) =>
    benchBackend(backend, sim, settings, log, dir),
  );
}
