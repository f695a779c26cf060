/**
 * 2. Stream throughput: `run_events` over 100,000 `message.delta` events (`max_events: 100000`)
 * against bare undici + eventsource-parser + JSON.parse over the same bytes, once without and
 * once with an `onChunk` publisher. The stream is 100,000 deltas then `run.completed`, so with
 * `max_events: 100000` both readers stop after the 100,000th event; for the connector that is
 * the contract's `stream_truncated` outcome, with all 100,000 events in `output.events`.
 */
import { performance } from 'node:perf_hooks';
import type { AipActionResult, AipStreamChunk, HermesConnector, RunEventsOutput } from 'aip-connector-hermes-agent';
import type { Pool } from 'undici';
import { bareStream, capabilityId, newBarePool, newConnector, type BareStreamResult } from './clients.js';
import { fullGc } from './heap.js';
import { CPU_RATIO_LABEL, pairedFigure, type BenchSettings, type Figure, type Log, type SectionResult } from './report.js';
import { expectedText, streamRunId, type BenchServer } from './servers.js';
import { cpuMicros, interleave } from './stats.js';

export const STREAM_EVENTS = 100_000;

export interface StreamRound {
  events: number;
  seconds: number;
  events_per_s: number;
  /** Client process CPU (user + system, all threads, GC included) per event. */
  cpu_us_per_event: number;
  chunks?: number;
}

/**
 * Streams per side and round. One 100k-event stream takes about 0.1 s, short enough for a
 * scheduler hiccup on a shared machine to move a single stream's rate by 10 %; a round sums
 * several streams per side, the sides alternating stream by stream.
 */
const STREAMS_PER_ROUND = { quick: 3, full: 5 };

/** A side's streams of one round as one: events, wall time and CPU summed. */
function mergeStreams(streams: StreamRound[]): StreamRound {
  const events = streams.reduce((sum, stream) => sum + stream.events, 0);
  const seconds = streams.reduce((sum, stream) => sum + stream.seconds, 0);
  const cpuUs = streams.reduce((sum, stream) => sum + stream.cpu_us_per_event * stream.events, 0);
  const merged: StreamRound = { events, seconds, events_per_s: events / seconds, cpu_us_per_event: cpuUs / events };
  if (streams[0]?.chunks !== undefined) merged.chunks = streams.reduce((sum, stream) => sum + (stream.chunks ?? 0), 0);
  return merged;
}

let actionCounter = 0;

/** Checks a connector result of the 100k stream; returns a reason when it is not what the contract says. */
export function checkConnectorStream(result: AipActionResult, text: string): string | undefined {
  const output = result.output as RunEventsOutput | undefined;
  if (result.error?.code !== 'connector.hermes_agent.stream_truncated') return `expected stream_truncated, got ${result.error?.code ?? result.status}`;
  if (output?.events.length !== STREAM_EVENTS) return `expected ${STREAM_EVENTS} events, got ${output?.events.length}`;
  if (output.text !== text) return 'the aggregated text differs from the deltas sent';
  return undefined;
}

export function checkBareStream(result: BareStreamResult, text: string): string | undefined {
  if (result.events.length !== STREAM_EVENTS) return `bare reader: expected ${STREAM_EVENTS} events, got ${result.events.length}`;
  if (result.text !== text) return 'bare reader: the aggregated text differs from the deltas sent';
  return undefined;
}

export function connectorStreamAction(suffix?: string | number) {
  return {
    id: `act_stream_${++actionCounter}`,
    capability_id: capabilityId('run_events'),
    input: { run_id: streamRunId(STREAM_EVENTS, suffix), max_events: STREAM_EVENTS },
  };
}

export async function connectorRound(connector: HermesConnector, text: string, publish: boolean): Promise<StreamRound> {
  let chunks = 0;
  let sequenceBroken = false;
  // The publisher a minimal host would have: count the chunk and check its sequence number.
  const onChunk = (chunk: AipStreamChunk) => {
    if (chunk.sequence !== chunks) sequenceBroken = true;
    chunks++;
  };
  const cpu = process.cpuUsage();
  const started = performance.now();
  const result = await connector.invoke(connectorStreamAction(), publish ? { onChunk } : undefined);
  const seconds = (performance.now() - started) / 1000;
  const cpuUs = cpuMicros(cpu);
  const problem =
    checkConnectorStream(result, text) ??
    (publish && (sequenceBroken || chunks !== STREAM_EVENTS + 1) ? `onChunk saw ${chunks} chunks (gap: ${sequenceBroken})` : undefined);
  if (problem) throw new Error(`connector run_events: ${problem}`);
  return { events: STREAM_EVENTS, seconds, events_per_s: STREAM_EVENTS / seconds, cpu_us_per_event: cpuUs / STREAM_EVENTS, ...(publish ? { chunks } : {}) };
}

async function bareRound(pool: Pool, origin: string, text: string): Promise<StreamRound> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  const result = await bareStream(pool, origin, streamRunId(STREAM_EVENTS), STREAM_EVENTS);
  const seconds = (performance.now() - started) / 1000;
  const cpuUs = cpuMicros(cpu);
  const problem = checkBareStream(result, text);
  if (problem) throw new Error(problem);
  return { events: result.events.length, seconds, events_per_s: result.events.length / seconds, cpu_us_per_event: cpuUs / result.events.length };
}

export async function benchStreamThroughput(server: BenchServer, settings: BenchSettings, log: Log): Promise<SectionResult> {
  const text = expectedText(STREAM_EVENTS);
  const connector = newConnector(server.origin);
  const pool = newBarePool(server.origin);
  try {
    const slices = settings.quick ? STREAMS_PER_ROUND.quick : STREAMS_PER_ROUND.full;
    log(
      `  ${settings.rounds} rounds x ${slices} alternating streams per side (bare, connector, connector + onChunk), ${STREAM_EVENTS} events each, ${server.streamBytes.get(STREAM_EVENTS)} bytes`,
    );
    const { rounds, records } = await interleave<StreamRound, 'bare' | 'connector' | 'connector_onchunk'>(
      {
        bare: () => bareRound(pool, server.origin, text),
        connector: () => connectorRound(connector, text, false),
        connector_onchunk: () => connectorRound(connector, text, true),
      },
      { rounds: settings.rounds, warmupRounds: settings.warmupRounds, slices, merge: mergeStreams, before: () => fullGc(1) },
    );
    const rate = (side: keyof typeof rounds) => rounds[side].map((round) => round.events_per_s);
    const cpu = (side: keyof typeof rounds) => rounds[side].map((round) => round.cpu_us_per_event);
    const figures: Figure[] = [
      pairedFigure(
        {
          id: 'stream.events_per_s',
          label: `run_events ${STREAM_EVENTS} events, events/s`,
          unit: 'events/s',
          target: { op: '>=', value: 0.9, judgedOn: 'median' },
        },
        rate('bare'),
        rate('connector'),
      ),
      pairedFigure(
        {
          id: 'stream.events_per_s_onchunk',
          label: `run_events ${STREAM_EVENTS} events + onChunk, events/s`,
          unit: 'events/s',
          target: { op: '>=', value: 0.85, judgedOn: 'median' },
        },
        rate('bare'),
        rate('connector_onchunk'),
      ),
      pairedFigure(
        {
          id: 'stream.cpu_per_event',
          label: 'run_events client CPU per event',
          unit: 'us',
          ratioLabel: CPU_RATIO_LABEL,
          target: { op: '<=', value: 1.15, judgedOn: 'median' },
        },
        cpu('bare'),
        cpu('connector'),
      ),
      pairedFigure(
        { id: 'stream.cpu_per_event_onchunk', label: 'run_events + onChunk client CPU per event', unit: 'us', ratioLabel: CPU_RATIO_LABEL },
        cpu('bare'),
        cpu('connector_onchunk'),
      ),
    ];
    return {
      id: 'stream_throughput',
      title: 'Stream throughput (run_events)',
      config: { events: STREAM_EVENTS, max_events: STREAM_EVENTS, body_bytes: server.streamBytes.get(STREAM_EVENTS), streams_per_side_and_round: slices },
      figures,
      rounds: records,
      errors: [],
    };
  } finally {
    await connector.close();
    await pool.close();
  }
}
