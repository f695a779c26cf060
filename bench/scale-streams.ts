/**
 * Scale (issue #17, part 3): 5,000 concurrent `run_events` streams over 50 endpoints, each with
 * its own pool (its own origin). The streams are opened and held idle (headers sent, no event)
 * until all 5,000 are open; the heap then, after two full GCs, minus the heap before, divided by
 * the streams, is the cost of one open idle stream (no event retained yet, so all of it is
 * overhead). Then every stream gets its events and ends: each must complete with every event,
 * and once connector.close() has resolved the server must hold no socket.
 */
import { createHermesConnector, type AipActionResult, type HermesConnector } from 'aip-connector-hermes-agent';
import { fullGc } from './heap.js';
import type { BenchSettings, Figure, Log, SectionResult } from './report.js';
import { startScaleServer, type ScaleServer } from './scale-server.js';
import { BENCH_API_KEY, expectedText } from './servers.js';
import { summarize } from './stats.js';

export const SCALE_STREAMS = 5000;
export const SCALE_ENDPOINTS = 50;
const DELTAS = 20;
const KiB = 1024;
const IDLE_TARGET_KIB = 16;
/** Polls of the server while streams open or sockets close: bounded, 20 ms apart. */
const POLLS = 1500;

interface ScaleRound {
  streams: number;
  idle_heap_bytes_per_stream: number;
  complete: number;
  events_received: number;
  sockets_open_after_close: number;
  seconds_to_open: number;
  problems: string[];
}

const pause = () => new Promise((resolve) => setTimeout(resolve, 20));

async function pollUntil(check: () => Promise<boolean>): Promise<boolean> {
  for (let poll = 0; poll < POLLS; poll++) {
    if (await check()) return true;
    await pause();
  }
  return false;
}

function newScaleConnector(server: ScaleServer): HermesConnector {
  return createHermesConnector({ endpoints: server.origins.map((baseUrl, index) => ({ id: `scale-${index}`, baseUrl, apiKey: BENCH_API_KEY })) });
}

function problemOf(result: AipActionResult, text: string): string | undefined {
  const output = result.output as { events?: unknown[]; text?: string; terminal?: boolean } | undefined;
  if (result.status !== 'completed') return `status ${result.status} (${result.error?.code})`;
  if (output?.events?.length !== DELTAS + 1) return `${output?.events?.length} events instead of ${DELTAS + 1}`;
  if (output.text !== text) return 'the aggregated text differs from the deltas sent';
  return undefined;
}

async function scaleRound(server: ScaleServer, streams: number): Promise<ScaleRound> {
  const connector = newScaleConnector(server);
  const problems: string[] = [];
  fullGc();
  const before = process.memoryUsage().heapUsed;
  const opened = Date.now();
  const calls = Array.from({ length: streams }, (_, index) =>
    connector.invoke({
      id: `act_scale_${index}`,
      capability_id: `cap:hermes_agent:scale-${index % SCALE_ENDPOINTS}:run_events`,
      input: { run_id: `run_scale_${index}` },
    }),
  );
  const allOpen = await pollUntil(async () => (await server.held()) === streams);
  const secondsToOpen = (Date.now() - opened) / 1000;
  if (!allOpen) problems.push(`only ${await server.held()} of ${streams} streams opened`);
  fullGc();
  const idleBytes = process.memoryUsage().heapUsed - before;
  await server.release(DELTAS);
  const results = await Promise.all(calls);
  const text = expectedText(DELTAS);
  let complete = 0;
  let events = 0;
  for (const result of results) {
    events += (result.output as { events?: unknown[] } | undefined)?.events?.length ?? 0;
    const problem = problemOf(result, text);
    if (problem === undefined) complete++;
    else if (problems.length < 5) problems.push(`${result.action_id}: ${problem}`);
  }
  await connector.close();
  await pollUntil(async () => (await server.sockets()) === 0);
  return {
    streams,
    idle_heap_bytes_per_stream: idleBytes / streams,
    complete,
    events_received: events,
    sockets_open_after_close: await server.sockets(),
    seconds_to_open: secondsToOpen,
    problems,
  };
}

export async function benchScale(settings: BenchSettings, log: Log): Promise<SectionResult> {
  const server = await startScaleServer(SCALE_ENDPOINTS);
  const roundCount = settings.quick ? 2 : 3;
  log(`  ${SCALE_STREAMS} streams over ${SCALE_ENDPOINTS} endpoints, held idle, then ${DELTAS} deltas each: ${roundCount} rounds, a fresh connector each`);
  const rounds: ScaleRound[] = [];
  try {
    await scaleRound(server, 200); // warm-up: code paths compiled outside the measured rounds
    for (let round = 0; round < roundCount; round++) rounds.push(await scaleRound(server, SCALE_STREAMS));
  } finally {
    await server.close();
  }
  const figures: Figure[] = [
    {
      id: 'scale.idle_stream_heap',
      label: `${SCALE_STREAMS} open idle streams: heap per stream`,
      unit: 'KiB',
      ratio: summarize(rounds.map((round) => round.idle_heap_bytes_per_stream / KiB)),
      ratioLabel: 'KiB of heap (after full GCs) per open stream with no event yet',
      target: { op: '<=', value: IDLE_TARGET_KIB, judgedOn: 'worst' },
      note: `all open after ${rounds.map((round) => round.seconds_to_open.toFixed(1)).join(', ')} s`,
    },
    {
      id: 'scale.streams_complete',
      label: `${SCALE_STREAMS} streams over ${SCALE_ENDPOINTS} endpoints: complete fraction`,
      unit: '',
      ratio: summarize(rounds.map((round) => round.complete / round.streams)),
      ratioLabel: 'streams complete with every event / streams',
      target: { op: '>=', value: 1, judgedOn: 'worst' },
      note: `events ${rounds.map((round) => `${round.events_received}/${round.streams * (DELTAS + 1)}`).join(', ')}`,
    },
    {
      id: 'scale.sockets_left_open',
      label: 'server sockets open after connector.close()',
      unit: '',
      ratio: summarize(rounds.map((round) => round.sockets_open_after_close)),
      ratioLabel: `open sockets (polled up to ${(POLLS * 20) / 1000} s after close())`,
      target: { op: '<=', value: 0, judgedOn: 'worst' },
    },
  ];
  return {
    id: 'scale',
    title: 'Scale (run_events)',
    config: { streams: SCALE_STREAMS, endpoints: SCALE_ENDPOINTS, deltas_per_stream: DELTAS, rounds: roundCount },
    figures,
    rounds: rounds.map((result, round) => ({ mode: 'scale_streams', round, warmup: false, contender: 'connector', result })),
    errors: rounds.flatMap((round, index) => round.problems.map((problem) => `round ${index}: ${problem}`)),
  };
}
