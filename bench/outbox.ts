/**
 * The outbox of run events (issue 34): the journal with one delivery target against the journal
 * alone, in interleaved rounds, on the simulator in this process, a loopback HTTP receiver and a
 * SQLite ledger (PostgreSQL too with HERMES_TEST_PG_URL).
 * - run_start: milliseconds per start, sequentially (the target's rows are written in the journal's
 *   create transaction; nothing is sent on the start's path).
 * - Lag: from the start of run_start to the receiver's acknowledgement of the run's terminal event.
 * - Fan-out: runs started together, then every one of their events delivered: events per second.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  createHermesConnector,
  createPostgresLedger,
  createSqliteLedger,
  type DeliveryTarget,
  type HermesConnector,
  type RunLedger,
} from 'aip-connector-hermes-agent';
import type { HermesSimulator } from 'aip-connector-hermes-agent/simulator';
import { createPgSchemaOn, type PgSchema } from '../test/helpers/pg-schema.js';
import { deltas, startRun } from './journal.js';
import { pairedFigure, type BenchSettings, type Figure, type Log, type SectionResult } from './report.js';
import { BENCH_API_KEY } from './servers.js';
import { durableBackendsSection } from './ledger-backends.js';
import { interleave, summarize } from './stats.js';

const ENDPOINT = 'bench';
/** startsPerRound: sequential starts per round; fanoutRuns (a fifth with --quick) of fanoutDeltas deltas, startConcurrency starts in flight. */
const SIZES = { startsPerRound: 20, fanoutRuns: 200, fanoutDeltas: 10, startConcurrency: 16 } as const;
const TERMINAL = 'run.completed';

/** The receiver: acknowledges every batch, and resolves a run's waiter when its terminal event arrives. */
class Receiver {
  readonly server: Server;
  readonly #terminal = new Map<string, () => void>();
  /** Terminal events acknowledged before anyone waited for them. */
  readonly #arrived = new Set<string>();
  events = 0;

  constructor() {
    this.server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const batch = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Array<{ run: string; event: string }>;
        this.events += batch.length;
        for (const { run, event } of batch) if (event === TERMINAL) this.#ended(run);
        response.end('{"accepted":true}');
      });
    });
  }

  /** Resolves once the run's terminal event is acknowledged (before or after this call). */
  terminal(runId: string): Promise<void> {
    if (this.#arrived.delete(runId)) return Promise.resolve();
    return new Promise((resolve) => this.#terminal.set(runId, resolve));
  }

  #ended(runId: string): void {
    const waiter = this.#terminal.get(runId);
    if (!waiter) return void this.#arrived.add(runId);
    this.#terminal.delete(runId);
    waiter();
  }

  target(url: string): DeliveryTarget {
    return {
      id: 'bench-receiver',
      maxBatch: 10,
      accepts: () => true,
      async deliver(events, signal) {
        const body = JSON.stringify(events.map((entry) => ({ run: entry.key.run_id, event: entry.event.event })));
        const response = await fetch(url, { method: 'POST', body, signal }).catch(() => undefined);
        await response?.text();
        return response?.ok ? { kind: 'delivered' } : { kind: 'retry', reason: `receiver answered ${response?.status ?? 'nothing'}` };
      },
    };
  }
}

interface Side {
  connector: HermesConnector;
  receiver?: Receiver;
}

async function starts(side: Side): Promise<{ start_ms: number; lag_ms: number | undefined }> {
  const startMs: number[] = [];
  const lagMs: number[] = [];
  for (let index = 0; index < SIZES.startsPerRound; index++) {
    const started = performance.now();
    const runId = await startRun(side.connector, deltas(2));
    startMs.push(performance.now() - started);
    if (side.receiver) {
      await side.receiver.terminal(runId);
      lagMs.push(performance.now() - started);
    }
  }
  return { start_ms: summarize(startMs).median, lag_ms: side.receiver ? summarize(lagMs).median : undefined };
}

/** Events delivered per second while `runs` runs are started together and delivered to their end. */
async function fanout(side: Side & { receiver: Receiver }, runs: number): Promise<number> {
  const before = side.receiver.events;
  const started = performance.now();
  const ended: Promise<void>[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: SIZES.startConcurrency }, async () => {
      while (next++ < runs) {
        const runId = await startRun(side.connector, deltas(SIZES.fanoutDeltas));
        ended.push(side.receiver.terminal(runId));
      }
    }),
  );
  await Promise.all(ended);
  return (side.receiver.events - before) / ((performance.now() - started) / 1000);
}

async function openLedger(name: 'sqlite' | 'postgres', path: string, schema: PgSchema | undefined): Promise<RunLedger> {
  return name === 'sqlite' ? createSqliteLedger({ path }) : createPostgresLedger({ connectionString: (schema as PgSchema).connectionString });
}

async function benchBackend(name: 'sqlite' | 'postgres', sim: HermesSimulator, settings: BenchSettings, log: Log, dir: string) {
  const schema = name === 'postgres' ? await createPgSchemaOn(process.env.HERMES_TEST_PG_URL as string, 'aip_bench_outbox') : undefined;
  const ledgers = [await openLedger(name, join(dir, 'off.db'), schema), await openLedger(name, join(dir, 'on.db'), schema)] as [RunLedger, RunLedger];
  const receiver = new Receiver();
  await new Promise<void>((resolve) => receiver.server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(receiver.server.address() as AddressInfo).port}/`;
  const endpoints = [{ id: ENDPOINT, baseUrl: sim.url, apiKey: BENCH_API_KEY }];
  const off: Side = { connector: createHermesConnector({ endpoints, ledger: ledgers[0], journal: { followersPerEndpoint: 1000 } }) };
  const on = {
    connector: createHermesConnector({ endpoints, ledger: ledgers[1], journal: { followersPerEndpoint: 1000 }, eventTargets: [receiver.target(url)] }),
    receiver,
  };
  const runs = settings.quick ? SIZES.fanoutRuns / 5 : SIZES.fanoutRuns;
  try {
    log(`  ${name}: ${SIZES.startsPerRound} sequential starts per round, journal alone and with a target`);
    const sequential = await interleave({ off: () => starts(off), on: () => starts(on) }, settings);
    log(`  ${name}: ${runs} runs of ${SIZES.fanoutDeltas} deltas delivered`);
    const many = await interleave({ on: () => fanout(on, runs) }, { ...settings, rounds: Math.max(3, Math.ceil(settings.rounds / 2)) });
    const figures: Figure[] = [
      pairedFigure(
        { id: `outbox_start_${name}`, label: `${name}: run_start, journal with one target / journal alone`, unit: 'ms', ratioLabel: 'target / none' },
        sequential.rounds.off.map((round) => round.start_ms),
        sequential.rounds.on.map((round) => round.start_ms),
      ),
      {
        id: `outbox_lag_${name}`,
        label: `${name}: run_start to the terminal event acknowledged by a loopback receiver`,
        unit: 'ms',
        connector: summarize(sequential.rounds.on.map((round) => round.lag_ms as number)),
      },
      { id: `outbox_fanout_${name}`, label: `${name}: events delivered per second, ${runs} runs at once`, unit: '/s', connector: summarize(many.rounds.on) },
    ];
    return { figures, rounds: [...sequential.records, ...many.records].map((record) => ({ backend: name, ...record })) };
  } finally {
    await off.connector.close();
    await on.connector.close();
    receiver.server.close();
    for (const ledger of ledgers) await ledger.close();
    await schema?.drop();
  }
}

export function benchOutbox(settings: BenchSettings, log: Log): Promise<SectionResult> {
  const config = {
    starts_per_round: SIZES.startsPerRound,
    fanout_runs: settings.quick ? SIZES.fanoutRuns / 5 : SIZES.fanoutRuns,
    fanout_deltas: SIZES.fanoutDeltas,
  };
  return durableBackendsSection({ id: 'outbox', title: 'Outbox of run events', config }, 'aip-bench-outbox-', {}, (backend, sim, dir) =>
    benchBackend(backend, sim, settings, log, dir),
  );
}
