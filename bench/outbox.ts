/**
 * The outbox of run events (issue 34): the journal with one delivery target against the journal
 * alone, in interleaved rounds, on the simulator in this process, a loopback HTTP receiver and a
 * SQLite ledger (PostgreSQL too with HERMES_TEST_PG_URL).
 * - run_start: milliseconds per start, sequentially (the target's rows are written in the journal's
 *   create transaction; nothing is sent on the start's path).
 * - Lag: from the start of run_start to the receiver's acknowledgement of the run's terminal event.
 * - Fan-out: runs started together, then every one of their events delivered: events per second.
 * - Webhook against run_events (issue 34, item 5): a connector with a Standard Webhooks target, whose
 *   receiver verifies every delivery with `standardwebhooks`, and a run_events reader following each
 *   of its runs. Terminal latency: from the simulator's emit time of the run's terminal event (its
 *   `timestamp`, on this process's clock) to the receiver's handler, against that to the reader's chunk, p50
 *   and p99 of the round's runs. Throughput: runs started together, events per second delivered to the
 *   webhook against read through run_events, over the same runs.
 */
import { chmodSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
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
import type { AipStreamChunk, HermesSseEvent } from 'aip-connector-hermes-agent';
import type { HermesSimulator } from 'aip-connector-hermes-agent/simulator';
import { Webhook } from 'standardwebhooks';
import { createPgSchemaOn, type PgSchema } from '../test/helpers/pg-schema.js';
import { deltas, startRun } from './journal.js';
import { pairedFigure, type BenchSettings, type Figure, type Log, type SectionResult } from './report.js';
import { BENCH_API_KEY } from './servers.js';
import { durableBackendsSection } from './ledger-backends.js';
import { interleave, quantile, summarize } from './stats.js';

const ENDPOINT = 'bench';
/** startsPerRound: sequential starts per round; fanoutRuns (a fifth with --quick) of fanoutDeltas deltas, startConcurrency starts in flight. */
const SIZES = { startsPerRound: 20, fanoutRuns: 200, fanoutDeltas: 10, startConcurrency: 16 } as const;
const TERMINAL = 'run.completed';
/** Sequential runs per round of the terminal-latency comparison (its p99 is of these). */
const LATENCY_RUNS = 50;

/** Now on the simulator's clock (`nowSeconds`: epoch milliseconds with sub-millisecond precision). */
const epochMs = () => performance.timeOrigin + performance.now();

type Parse = (body: string, headers: IncomingHttpHeaders) => Array<{ run: string; event: string }>;

const parseBatch: Parse = (body) => JSON.parse(body) as Array<{ run: string; event: string }>;

/**
 * The receiver: acknowledges every request, counts the events `parse` finds in it, and resolves a run's
 * waiter, with the epoch time its handler saw it, when its terminal event arrives.
 */
class Receiver {
  readonly server: Server;
  readonly #terminal = new Map<string, (at: number) => void>();
  /** Terminal events acknowledged before anyone waited for them, with when. */
  readonly #arrived = new Map<string, number>();
  events = 0;

  constructor(parse: Parse = parseBatch) {
    this.server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const batch = parse(Buffer.concat(chunks).toString('utf8'), request.headers);
        const at = epochMs();
        this.events += batch.length;
        for (const { run, event } of batch) if (event === TERMINAL) this.#ended(run, at);
        response.end('{"accepted":true}');
      });
    });
  }

  /** Resolves, with when the handler saw it, once the run's terminal event is acknowledged (before or after this call). */
  terminal(runId: string): Promise<number> {
    const arrived = this.#arrived.get(runId);
    if (arrived !== undefined) {
      this.#arrived.delete(runId);
      return Promise.resolve(arrived);
    }
    return new Promise((resolve) => this.#terminal.set(runId, resolve));
  }

  #ended(runId: string, at: number): void {
    const waiter = this.#terminal.get(runId);
    if (!waiter) return void this.#arrived.set(runId, at);
    this.#terminal.delete(runId);
    waiter(at);
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

/** A Standard Webhooks receiver: each delivery verified with `standardwebhooks` before it counts. */
function webhookReceiver(secret: string): Receiver {
  const verifier = new Webhook(secret);
  return new Receiver((body, headers) => {
    const payload = verifier.verify(body, headers as Record<string, string>) as { data: { run_id: string; event: HermesSseEvent } };
    return [{ run: payload.data.run_id, event: payload.data.event.event }];
  });
}

/** A secret file the webhook option takes (owner-only), and its secret. */
function webhookSecret(dir: string): { path: string; secret: string } {
  const secret = `whsec_${Buffer.from(Array.from({ length: 32 }, (_, index) => index)).toString('base64')}`;
  const path = join(dir, 'webhook.secret');
  writeFileSync(path, secret);
  chmodSync(path, 0o600);
  return { path, secret };
}

interface Side {
  connector: HermesConnector;
  receiver?: Receiver;
}

/** Reads the run through run_events to its end: when (epoch ms) the terminal event's chunk arrived, and how many events it read. */
async function readRun(connector: HermesConnector, runId: string): Promise<{ terminalAt: number; events: number }> {
  let terminalAt = Number.NaN;
  let events = 0;
  const onChunk = (chunk: AipStreamChunk) => {
    const event = (chunk.data as { hermes_sse?: HermesSseEvent } | undefined)?.hermes_sse;
    if (!event) return;
    events++;
    if (event.event === TERMINAL) terminalAt = epochMs();
  };
  const result = await connector.invoke(
    { id: `act_read_${runId}`, capability_id: `cap:hermes_agent:${ENDPOINT}:run_events`, input: { run_id: runId, max_events: 100_000 } },
    { onChunk },
  );
  if (result.status !== 'completed') throw new Error(`run_events did not complete: ${result.error?.code ?? result.status}`);
  return { terminalAt, events };
}

/** When the simulator emitted the run's terminal event (epoch ms, its `timestamp`). */
function terminalEmittedAt(sim: HermesSimulator, runId: string): number {
  const terminal = sim.run(runId)?.events.find((event) => event['event'] === TERMINAL);
  return Number(terminal?.['timestamp']) * 1000;
}

interface TerminalLatency {
  webhook_p50_ms: number;
  webhook_p99_ms: number;
  reader_p50_ms: number;
  reader_p99_ms: number;
}

/** Sequential runs, each followed by a run_events reader while its webhook delivers it: emit → handler, emit → reader chunk. */
async function terminalLatency(side: Side & { receiver: Receiver }, sim: HermesSimulator): Promise<TerminalLatency> {
  const webhook: number[] = [];
  const reader: number[] = [];
  for (let index = 0; index < LATENCY_RUNS; index++) {
    const runId = await startRun(side.connector, deltas(2));
    const [read, handled] = await Promise.all([readRun(side.connector, runId), side.receiver.terminal(runId)]);
    const emitted = terminalEmittedAt(sim, runId);
    webhook.push(handled - emitted);
    reader.push(read.terminalAt - emitted);
  }
  return {
    webhook_p50_ms: quantile(webhook, 0.5),
    webhook_p99_ms: quantile(webhook, 0.99),
    reader_p50_ms: quantile(reader, 0.5),
    reader_p99_ms: quantile(reader, 0.99),
  };
}

/** Runs started together, each read through run_events while its webhook delivers it: events per second of each, over the same runs. */
async function hookedFanout(side: Side & { receiver: Receiver }, runs: number): Promise<{ webhook: number; reader: number }> {
  const before = side.receiver.events;
  const started = performance.now();
  const delivered: Promise<number>[] = [];
  const read: Promise<{ events: number; endedAt: number }>[] = [];
  await startTogether(side.connector, runs, (runId) => {
    delivered.push(side.receiver.terminal(runId).then(() => performance.now()));
    read.push(readRun(side.connector, runId).then((result) => ({ events: result.events, endedAt: performance.now() })));
  });
  const deliveredAt = Math.max(...(await Promise.all(delivered)));
  const reads = await Promise.all(read);
  const readAt = Math.max(...reads.map((result) => result.endedAt));
  const readEvents = reads.reduce((sum, result) => sum + result.events, 0);
  return {
    webhook: (side.receiver.events - before) / ((deliveredAt - started) / 1000),
    reader: readEvents / ((readAt - started) / 1000),
  };
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

/** Starts `runs` runs of fanoutDeltas deltas, startConcurrency at a time, handing each run id to `started`. */
async function startTogether(connector: HermesConnector, runs: number, started: (runId: string) => void): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: SIZES.startConcurrency }, async () => {
      while (next++ < runs) started(await startRun(connector, deltas(SIZES.fanoutDeltas)));
    }),
  );
}

/** Events delivered per second while `runs` runs are started together and delivered to their end. */
async function fanout(side: Side & { receiver: Receiver }, runs: number): Promise<number> {
  const before = side.receiver.events;
  const started = performance.now();
  const ended: Promise<number>[] = [];
  await startTogether(side.connector, runs, (runId) => ended.push(side.receiver.terminal(runId)));
  await Promise.all(ended);
  return (side.receiver.events - before) / ((performance.now() - started) / 1000);
}

async function listen(receiver: Receiver): Promise<string> {
  await new Promise<void>((resolve) => receiver.server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(receiver.server.address() as AddressInfo).port}/`;
}

async function openLedger(name: 'sqlite' | 'postgres', path: string, schema: PgSchema | undefined): Promise<RunLedger> {
  return name === 'sqlite' ? createSqliteLedger({ path }) : createPostgresLedger({ connectionString: (schema as PgSchema).connectionString });
}

async function benchBackend(name: 'sqlite' | 'postgres', sim: HermesSimulator, settings: BenchSettings, log: Log, dir: string) {
  const schema = name === 'postgres' ? await createPgSchemaOn(process.env.HERMES_TEST_PG_URL as string, 'aip_bench_outbox') : undefined;
  const ledgers = [
    await openLedger(name, join(dir, 'off.db'), schema),
    await openLedger(name, join(dir, 'on.db'), schema),
    await openLedger(name, join(dir, 'hooked.db'), schema),
  ] as [RunLedger, RunLedger, RunLedger];
  const receiver = new Receiver();
  const url = await listen(receiver);
  const secret = webhookSecret(dir);
  const hookReceiver = webhookReceiver(secret.secret);
  const hookUrl = await listen(hookReceiver);
  const endpoints = [{ id: ENDPOINT, baseUrl: sim.url, apiKey: BENCH_API_KEY }];
  const off: Side = { connector: createHermesConnector({ endpoints, ledger: ledgers[0], journal: { followersPerEndpoint: 1000 } }) };
  const on = {
    connector: createHermesConnector({ endpoints, ledger: ledgers[1], journal: { followersPerEndpoint: 1000 }, eventTargets: [receiver.target(url)] }),
    receiver,
  };
  const webhooks = [{ url: hookUrl, secretFile: secret.path, allowLoopbackHttp: true }];
  const hooked = {
    connector: createHermesConnector({ endpoints, ledger: ledgers[2], journal: { followersPerEndpoint: 1000 }, webhooks }),
    receiver: hookReceiver,
  };
  const runs = settings.quick ? SIZES.fanoutRuns / 5 : SIZES.fanoutRuns;
  try {
    log(`  ${name}: ${SIZES.startsPerRound} sequential starts per round, journal alone and with a target`);
    const sequential = await interleave({ off: () => starts(off), on: () => starts(on) }, settings);
    log(`  ${name}: ${runs} runs of ${SIZES.fanoutDeltas} deltas delivered`);
    const many = await interleave({ on: () => fanout(on, runs) }, { ...settings, rounds: Math.max(3, Math.ceil(settings.rounds / 2)) });
    log(`  ${name}: ${LATENCY_RUNS} runs per round to a webhook and a run_events reader, then ${runs} at once`);
    const latency = await interleave({ hooked: () => terminalLatency(hooked, sim) }, settings);
    const hookedMany = await interleave({ hooked: () => hookedFanout(hooked, runs) }, { ...settings, rounds: Math.max(3, Math.ceil(settings.rounds / 2)) });
    const latencyOf = (field: keyof TerminalLatency) => latency.rounds.hooked.map((round) => round[field]);
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
      ...(['p50', 'p99'] as const).map((q) =>
        pairedFigure(
          {
            id: `outbox_webhook_terminal_${q}_${name}`,
            label: `${name}: Hermes' terminal event to the webhook receiver's handler, ${q} of ${LATENCY_RUNS} runs; bare: to a run_events reader of the same runs`,
            unit: 'ms',
            ratioLabel: 'webhook / run_events',
          },
          latencyOf(`reader_${q}_ms`),
          latencyOf(`webhook_${q}_ms`),
        ),
      ),
      pairedFigure(
        {
          id: `outbox_webhook_rate_${name}`,
          label: `${name}: events per second delivered to one webhook, ${runs} runs at once; bare: read through run_events`,
          unit: '/s',
          ratioLabel: 'webhook / run_events',
        },
        hookedMany.rounds.hooked.map((round) => round.reader),
        hookedMany.rounds.hooked.map((round) => round.webhook),
      ),
    ];
    const records = [...sequential.records, ...many.records, ...latency.records, ...hookedMany.records];
    return { figures, rounds: records.map((record) => ({ backend: name, ...record })) };
  } finally {
    await off.connector.close();
    await on.connector.close();
    await hooked.connector.close();
    receiver.server.close();
    hookReceiver.server.close();
    for (const ledger of ledgers) await ledger.close();
    await schema?.drop();
  }
}

export function benchOutbox(settings: BenchSettings, log: Log): Promise<SectionResult> {
  const config = {
    starts_per_round: SIZES.startsPerRound,
    fanout_runs: settings.quick ? SIZES.fanoutRuns / 5 : SIZES.fanoutRuns,
    fanout_deltas: SIZES.fanoutDeltas,
    latency_runs_per_round: LATENCY_RUNS,
  };
  return durableBackendsSection({ id: 'outbox', title: 'Outbox of run events', config }, 'aip-bench-outbox-', {}, (backend, sim, dir) =>
    benchBackend(backend, sim, settings, log, dir),
  );
}
