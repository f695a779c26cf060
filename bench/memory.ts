/**
 * 3. Memory.
 * (a) Peak heap growth while aggregating the 100,000-event stream, against "the bytes of the
 *     retained events": the UTF-8 size of `JSON.stringify(output.events)`, i.e. the compact JSON
 *     of exactly what the result keeps (the Hermes frames re-serialized without Python's spacing,
 *     without the `data: ` prefixes, blank lines and the trailing comment). Heap method: heap.ts.
 *     The bare reader is measured the same way, interleaved, for context.
 * (b) 500 concurrent `run_events` streams of 200 events each (199 deltas + run.completed), one
 *     connector: every stream must complete with all its events, in `output.events` and as
 *     gapless onChunk chunks, and once `connector.close()` has resolved the server must hold no
 *     socket open.
 */
import { performance } from 'node:perf_hooks';
import type { AipActionResult, AipStreamChunk, RunEventsOutput } from 'aip-connector-hermes-agent';
import { bareStream, capabilityId, newBarePool, newConnector } from './clients.js';
import { measureHeap, type HeapMeasurement } from './heap.js';
import type { BenchSettings, Figure, Log, SectionResult } from './report.js';
import { expectedText, streamRunId, type BenchServer } from './servers.js';
import { interleave, summarize } from './stats.js';
import { STREAM_EVENTS, checkBareStream, checkConnectorStream, connectorStreamAction } from './stream-throughput.js';

export const CONCURRENT_STREAMS = 500;
export const CONCURRENT_EVENTS = 200;
/** Deltas per concurrent stream: 199 message.delta + run.completed = 200 events. */
export const CONCURRENT_DELTAS = CONCURRENT_EVENTS - 1;
/** How long the server may take to see the FINs of sockets the client closed before close() resolved. */
const SOCKET_GRACE_MS = 1000;

const MiB = 1024 * 1024;

interface SingleStreamRound {
  peak_growth_bytes: number;
  retained_growth_bytes: number;
  retained_event_bytes: number;
  peak_over_event_bytes: number;
  samples: number;
}

interface ConcurrentRound {
  streams: number;
  streams_complete: number;
  events_expected: number;
  events_received: number;
  chunks_received: number;
  peak_growth_bytes: number;
  retained_event_bytes: number;
  peak_server_sockets: number;
  server_sockets_open_at_close: number;
  server_sockets_open_after_grace: number;
  client_tcp_handles_after_close: number;
  seconds: number;
  problems: string[];
}

function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value));
}

function singleRound(peak: number, retained: number, eventBytes: number, samples: number): SingleStreamRound {
  return { peak_growth_bytes: peak, retained_growth_bytes: retained, retained_event_bytes: eventBytes, peak_over_event_bytes: peak / eventBytes, samples };
}

async function waitForServerSockets(server: BenchServer, graceMs: number): Promise<{ atClose: number; afterGrace: number }> {
  const atClose = (await server.sockets()).open;
  let open = atClose;
  const until = Date.now() + graceMs;
  while (open > 0 && Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    open = (await server.sockets()).open;
  }
  return { atClose, afterGrace: open };
}

function tcpHandles(): number {
  return process.getActiveResourcesInfo().filter((name) => name === 'TCPSocketWrap' || name === 'TCPWRAP').length;
}

async function concurrentRound(server: BenchServer, text: string): Promise<ConcurrentRound> {
  await waitForServerSockets(server, SOCKET_GRACE_MS);
  await server.resetPeak();
  const connector = newConnector(server.origin);
  const chunks = Array.from({ length: CONCURRENT_STREAMS }, () => [] as AipStreamChunk[]);
  const started = Date.now();
  let measured: HeapMeasurement<AipActionResult[]>;
  let peakSockets: number;
  let seconds = 0;
  try {
    measured = await measureHeap(async () => {
      const opened = performance.now();
      const results = await Promise.all(
        chunks.map((received, index) =>
          connector.invoke(
            { id: `act_many_${index}_${started}`, capability_id: capabilityId('run_events'), input: { run_id: streamRunId(CONCURRENT_DELTAS, index) } },
            { onChunk: (chunk) => void received.push(chunk) },
          ),
        ),
      );
      seconds = (performance.now() - opened) / 1000;
      return results;
    });
    peakSockets = (await server.sockets()).peak;
  } finally {
    await connector.close();
  }
  const sockets = await waitForServerSockets(server, SOCKET_GRACE_MS);
  const results: AipActionResult[] = measured.result;
  const problems: string[] = [];
  let complete = 0;
  let events = 0;
  let eventBytes = 0;
  results.forEach((result, index) => {
    const output = result.output as RunEventsOutput | undefined;
    const received = chunks[index] as AipStreamChunk[];
    events += output?.events.length ?? 0;
    eventBytes += output ? jsonBytes(output.events) : 0;
    const gapless = received.every((chunk, at) => chunk.sequence === at && chunk.action_id === result.action_id);
    const ok =
      result.status === 'completed' &&
      output?.events.length === CONCURRENT_EVENTS &&
      output.terminal_event === 'run.completed' &&
      output.text === text &&
      received.length === CONCURRENT_EVENTS &&
      gapless &&
      received[received.length - 1]?.kind === 'done';
    if (ok) complete++;
    else if (problems.length < 5)
      problems.push(`stream ${index}: ${result.error?.code ?? result.status}, ${output?.events.length ?? 0} events, ${received.length} chunks`);
  });
  return {
    streams: CONCURRENT_STREAMS,
    streams_complete: complete,
    events_expected: CONCURRENT_STREAMS * CONCURRENT_EVENTS,
    events_received: events,
    chunks_received: chunks.reduce((sum, list) => sum + list.length, 0),
    peak_growth_bytes: measured.peakGrowthBytes,
    retained_event_bytes: eventBytes,
    peak_server_sockets: peakSockets,
    server_sockets_open_at_close: sockets.atClose,
    server_sockets_open_after_grace: sockets.afterGrace,
    client_tcp_handles_after_close: tcpHandles(),
    seconds,
    problems,
  };
}

async function singleStream(server: BenchServer, settings: BenchSettings) {
  const text = expectedText(STREAM_EVENTS);
  const connector = newConnector(server.origin);
  const pool = newBarePool(server.origin);
  try {
    return await interleave<SingleStreamRound, 'bare' | 'connector'>(
      {
        async connector() {
          const measured = await measureHeap(() => connector.invoke(connectorStreamAction()));
          const problem = checkConnectorStream(measured.result, text);
          if (problem) throw new Error(`connector run_events: ${problem}`);
          const eventBytes = jsonBytes((measured.result.output as RunEventsOutput).events);
          return singleRound(measured.peakGrowthBytes, measured.retainedGrowthBytes, eventBytes, measured.samples);
        },
        async bare() {
          const measured = await measureHeap(() => bareStream(pool, server.origin, streamRunId(STREAM_EVENTS), STREAM_EVENTS));
          const problem = checkBareStream(measured.result, text);
          if (problem) throw new Error(problem);
          return singleRound(measured.peakGrowthBytes, measured.retainedGrowthBytes, jsonBytes(measured.result.events), measured.samples);
        },
      },
      { rounds: settings.rounds, warmupRounds: settings.warmupRounds },
    );
  } finally {
    await connector.close();
    await pool.close();
  }
}

export async function benchMemory(server: BenchServer, settings: BenchSettings, log: Log): Promise<SectionResult> {
  const errors: string[] = [];
  log(`  single stream: ${settings.rounds} rounds x (bare, connector), ${STREAM_EVENTS} events`);
  const single = await singleStream(server, settings);

  const concurrentRounds = settings.quick ? 2 : 5;
  log(`  ${CONCURRENT_STREAMS} concurrent streams x ${CONCURRENT_EVENTS} events: ${concurrentRounds} rounds, a fresh connector each`);
  const concurrentText = expectedText(CONCURRENT_DELTAS);
  const concurrent: ConcurrentRound[] = [];
  for (let round = 0; round < concurrentRounds; round++) {
    const result = await concurrentRound(server, concurrentText);
    concurrent.push(result);
    for (const problem of result.problems) errors.push(`500 streams, round ${round}: ${problem}`);
  }

  const of = (side: 'bare' | 'connector', key: keyof SingleStreamRound) => single.rounds[side].map((round) => round[key]);
  const mib = (values: number[]) => values.map((value) => value / MiB);
  const figures: Figure[] = [
    {
      id: 'memory.single_peak_over_event_bytes',
      label: `${STREAM_EVENTS}-event stream: peak heap growth / retained event bytes`,
      unit: 'MiB',
      bare: summarize(mib(of('bare', 'peak_growth_bytes'))),
      connector: summarize(mib(of('connector', 'peak_growth_bytes'))),
      ratio: summarize(of('connector', 'peak_over_event_bytes')),
      ratioLabel: 'connector peak growth / JSON bytes of output.events',
      target: { op: '<=', value: 2.1, judgedOn: 'median' },
      note: `bare reader's own ratio: ${summarize(of('bare', 'peak_over_event_bytes')).median.toFixed(2)}`,
    },
    {
      id: 'memory.single_retained',
      label: `${STREAM_EVENTS}-event stream: heap kept by the result (after GC)`,
      unit: 'MiB',
      bare: summarize(mib(of('bare', 'retained_growth_bytes'))),
      connector: summarize(mib(of('connector', 'retained_growth_bytes'))),
      ratio: summarize(of('connector', 'retained_growth_bytes').map((bytes, i) => bytes / (of('connector', 'retained_event_bytes')[i] as number))),
      ratioLabel: 'retained heap / JSON bytes of output.events',
      note: `retained event bytes: ${(summarize(of('connector', 'retained_event_bytes')).median / MiB).toFixed(2)} MiB`,
    },
    {
      id: 'memory.concurrent_complete',
      label: `${CONCURRENT_STREAMS} concurrent streams x ${CONCURRENT_EVENTS} events: complete fraction`,
      unit: '',
      ratio: summarize(concurrent.map((round) => round.streams_complete / round.streams)),
      ratioLabel: 'streams complete with all events and chunks / streams',
      target: { op: '>=', value: 1, judgedOn: 'worst' },
      note: `events ${concurrent.map((round) => `${round.events_received}/${round.events_expected}`).join(', ')}; peak server sockets ${concurrent.map((round) => round.peak_server_sockets).join(', ')}`,
    },
    {
      id: 'memory.concurrent_sockets_left_open',
      label: 'server sockets open after connector.close()',
      unit: '',
      ratio: summarize(concurrent.map((round) => round.server_sockets_open_after_grace)),
      ratioLabel: `open sockets (polled up to ${SOCKET_GRACE_MS} ms after close())`,
      target: { op: '<=', value: 0, judgedOn: 'worst' },
      note: `right at close(): ${concurrent.map((round) => round.server_sockets_open_at_close).join(', ')}; client TCP handles after: ${concurrent.map((round) => round.client_tcp_handles_after_close).join(', ')}`,
    },
    {
      id: 'memory.concurrent_peak',
      label: `${CONCURRENT_STREAMS} concurrent streams: peak heap growth`,
      unit: 'MiB',
      connector: summarize(mib(concurrent.map((round) => round.peak_growth_bytes))),
      ratio: summarize(concurrent.map((round) => round.peak_growth_bytes / round.retained_event_bytes)),
      ratioLabel: 'peak growth / JSON bytes of all output.events',
      note: `wall time ${summarize(concurrent.map((round) => round.seconds)).median.toFixed(2)} s`,
    },
  ];
  return {
    id: 'memory',
    title: 'Memory',
    config: {
      single_stream_events: STREAM_EVENTS,
      concurrent_streams: CONCURRENT_STREAMS,
      events_per_concurrent_stream: CONCURRENT_EVENTS,
      concurrent_rounds: concurrentRounds,
      socket_grace_ms: SOCKET_GRACE_MS,
      retained_event_bytes: 'Buffer.byteLength(JSON.stringify(result.output.events))',
      heap: 'peak of process.memoryUsage().heapUsed sampled every event-loop turn, minus heapUsed after two full GCs before the call',
    },
    figures,
    rounds: [
      ...single.records.map((record) => ({ mode: 'single_stream', ...record })),
      ...concurrent.map((result, round) => ({ mode: 'concurrent_streams', round, warmup: false, contender: 'connector', result })),
    ],
    errors,
  };
}
