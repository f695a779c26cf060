/**
 * `npm run bench` (and `npm run bench -- --quick`, `--rounds N`): the connector's cost against
 * the bare HTTP path, measured in this process run, on its own loopback server. See report.ts for
 * the outputs; the exit code is 0 only when every target holds.
 */
import { performance } from 'node:perf_hooks';
import { benchDiscovery } from './discovery.js';
import { benchPipelineCost } from './pipeline-cost.js';
import { gcSource } from './heap.js';
import { benchHost } from './host.js';
import { benchHostile } from './hostile.js';
import { benchJournal } from './journal.js';
import { benchOutbox } from './outbox.js';
import { LEDGER_CONCURRENCY, benchLedgerCost } from './ledger-cost.js';
import { CONCURRENT_DELTAS, benchMemory } from './memory.js';
import { buildReport, describeMachine, loadAverage, machineInfo, renderTable, writeResults, type BenchSettings, type SectionResult } from './report.js';
import { CONCURRENCY, benchRequestOverhead } from './request-overhead.js';
import { startBenchServer } from './servers.js';
import { SCALE_ENDPOINTS, SCALE_STREAMS, benchScale } from './scale-streams.js';
import { STREAM_EVENTS, benchStreamThroughput } from './stream-throughput.js';
import { benchTelemetry } from './telemetry.js';

const MIN_ROUNDS = 5;
/** The sections `--only` can name, in the order they run. */
const SECTIONS = ['discovery', 'request', 'stream', 'memory', 'telemetry', 'pipeline', 'ledger', 'journal', 'outbox', 'scale', 'host', 'hostile'] as const;
type SectionName = (typeof SECTIONS)[number];

function parseArgs(argv: string[]): BenchSettings {
  let quick = false;
  let rounds: number | undefined;
  let only: string[] | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--quick') quick = true;
    else if (arg === '--rounds' || arg?.startsWith('--rounds=')) {
      const value = arg === '--rounds' ? argv[++i] : arg.slice('--rounds='.length);
      rounds = Number(value);
      if (!Number.isInteger(rounds) || rounds < MIN_ROUNDS) usage(`--rounds must be an integer >= ${MIN_ROUNDS}`);
    } else if (arg === '--only' || arg?.startsWith('--only=')) {
      only = (arg === '--only' ? argv[++i] : arg.slice('--only='.length))?.split(',') ?? [];
      if (only.length === 0 || only.some((name) => !(SECTIONS as readonly string[]).includes(name))) usage(`--only takes a list of ${SECTIONS.join(', ')}`);
    } else if (arg === '--help' || arg === '-h') usage();
    else usage(`unknown argument ${arg}`);
  }
  return { quick, rounds: rounds ?? (quick ? MIN_ROUNDS : 7), warmupRounds: 1, ...(only ? { only } : {}) };
}

function usage(problem?: string): never {
  if (problem) console.error(problem);
  console.error(
    `usage: npm run bench [-- [--quick] [--rounds N] [--only SECTION,...]]   (N >= 5; default 7, --quick 5 with smaller rounds; sections: ${SECTIONS.join(', ')})`,
  );
  process.exit(problem ? 2 : 0);
}

const log = (line: string) => console.log(line);

async function section(name: string, run: () => Promise<SectionResult>): Promise<SectionResult> {
  const started = performance.now();
  log(`${name} ...`);
  try {
    const result = await run();
    log(`  done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    return result;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    log(`  FAILED: ${message}`);
    return { id: name, title: name, config: {}, figures: [], rounds: [], errors: [message] };
  }
}

async function main(): Promise<number> {
  const settings = parseArgs(process.argv.slice(2));
  const started = performance.now();
  const machine = machineInfo();
  log(
    `aip-connector-hermes-agent bench${settings.quick ? ' --quick' : ''}${settings.only ? ` --only ${settings.only.join(',')}` : ''}: ${settings.rounds} interleaved rounds (+${settings.warmupRounds} warm-up) per figure`,
  );
  log(`machine: ${describeMachine(machine)}; load average ${machine.load_average.join(' ')}`);

  const runs = (name: SectionName) => settings.only === undefined || settings.only.includes(name);
  const sections: SectionResult[] = [];
  // Discovery first: it times the one call of the process that compiles the schemas.
  const discovery = runs('discovery') ? await section('Scale of discovery', () => benchDiscovery(settings, log)) : undefined;
  if (runs('request') || runs('stream') || runs('memory') || runs('telemetry')) {
    const server = await startBenchServer([STREAM_EVENTS, CONCURRENT_DELTAS]);
    log(`bench server: ${server.origin} (child process)`);
    try {
      if (runs('request')) sections.push(await section('Request overhead', () => benchRequestOverhead(server, settings, log)));
      if (runs('stream')) sections.push(await section('Stream throughput', () => benchStreamThroughput(server, settings, log)));
      if (runs('memory')) sections.push(await section('Memory', () => benchMemory(server, settings, log)));
      if (runs('telemetry')) sections.push(await section('OpenTelemetry cost', () => benchTelemetry(server, settings, log)));
    } finally {
      await server.close();
    }
  }
  // No server at all: an in-memory dispatcher.
  if (runs('pipeline')) sections.push(await section('Pipeline cost', () => benchPipelineCost(settings, log)));
  // Their own servers: run_start answers, and streams held open until released.
  if (runs('ledger')) sections.push(await section('Ledger cost', () => benchLedgerCost(settings, log)));
  // The simulator in this process: the journal's followers against reading Hermes directly.
  if (runs('journal')) sections.push(await section('Run event journal', () => benchJournal(settings, log)));
  // The same simulator, the journal with a delivery target to a loopback receiver against the journal alone.
  if (runs('outbox')) sections.push(await section('Outbox of run events', () => benchOutbox(settings, log)));
  if (runs('scale')) sections.push(await section('Scale', () => benchScale(settings, log)));
  // The built host in this process, driven over loopback by the runtime double in a child process.
  if (runs('host')) sections.push(await section('AIP remote connector host', () => benchHost(settings, log)));
  // The same, under a flood of 4 MiB bodies with bad signatures: a fresh host per round.
  if (runs('hostile')) sections.push(await section('AIP host under hostile load', () => benchHostile(settings, log)));
  if (discovery) sections.push(discovery);

  const durationS = (performance.now() - started) / 1000;
  machine.load_average_end = loadAverage();
  const report = buildReport(sections, settings, machine, durationS, {
    interleaving:
      'every round runs each contender once, rotating which goes first; ratios are connector/bare of the same round; figures are median [min–max] over rounds after warm-up',
    baseline:
      'bare undici.request on its own Pool (same options as the connector default), same request headers; JSON.parse, or eventsource-parser + JSON.parse into the same events/text aggregate; for run_status throughput also Pool#dispatch() with a minimal handler (collect the chunks, JSON.parse at the end)',
    connector: 'the built package (dist/) imported by name, default options, no logger (silent)',
    server: 'node:http on 127.0.0.1:0 in a child process, pre-rendered byte-identical bodies',
    gc: gcSource(),
    request_concurrency: String(CONCURRENCY),
    ledger: `run_start with a fresh key per call at concurrency 1 and ${LEDGER_CONCURRENCY}; durable ledgers paired with the memory ledger of the same round; PostgreSQL only with HERMES_TEST_PG_URL`,
    journal:
      'journal on against off on the in-process simulator: one long stream, and many runs followed at once (CPU, heap, appends per event); SQLite, and PostgreSQL with HERMES_TEST_PG_URL',
    outbox:
      'the journal with one delivery target (a loopback HTTP receiver) against the journal alone on the in-process simulator: run_start latency, start-to-terminal-delivered lag, events delivered per second; SQLite, and PostgreSQL with HERMES_TEST_PG_URL',
    scale: `${SCALE_STREAMS} run_events streams over ${SCALE_ENDPOINTS} endpoints (one origin and pool each), held idle, then released`,
    host: "run_status through the built host (openHost, SQLite ledger) in the bench process, driven by test/helpers/aip-runtime in a child process; the host's CPU is the bench process's; wire floor, replay claim and Ed25519 pair in the bench process, same rounds",
    hostile:
      'a fresh built hermes-aip host per round (--trace-gc): valid run_status idle, 4 MiB bad-signature bodies one by one, then 100 at once with valid actions sent meanwhile (5 s timeout, no retry); host CPU from /proc, heap peaks from --trace-gc',
  });
  log('');
  log(renderTable(report.sections));
  const files = writeResults(report);
  log('');
  log(`wrote ${files.json}`);
  log(`wrote ${files.svg}`);
  log(`load average at the end: ${machine.load_average_end.join(' ')} (other work on the machine adds noise that interleaving only partly cancels)`);
  const missed = report.targets.filter((target) => !target.holds).map((target) => target.id);
  log(`${report.all_targets_hold ? 'every target holds' : `TARGETS MISSED: ${missed.join(', ')}`} (${durationS.toFixed(0)} s)`);
  return report.all_targets_hold ? 0 : 1;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  },
);
