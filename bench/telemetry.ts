/**
 * OpenTelemetry cost: the connector with no SDK registered (its default: every span and metric a
 * no-op) against the same connector with the trace and metric SDKs and an exporter that drops
 * everything, so the figure is the SDK's own work (spans, attributes, metric aggregation).
 * Reported, without a target: the no-SDK side is what every other figure of this bench measures.
 */
import type { HermesConnector } from 'aip-connector-hermes-agent';
import { createHermesConnector } from 'aip-connector-hermes-agent';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, SimpleSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { BENCH_API_KEY, expectedText, type BenchServer } from './servers.js';
import { ENDPOINT_ID, newConnector } from './clients.js';
import { fullGc } from './heap.js';
import { pairedFigure, type BenchSettings, type Log, type SectionResult } from './report.js';
import { CONCURRENCY, concurrentRound, connectorCall, slice, type ConcurrentRound, type Slice } from './request-overhead.js';
import { interleave } from './stats.js';
import { STREAM_EVENTS, connectorRound, type StreamRound } from './stream-throughput.js';

const dropEverything: SpanExporter = {
  export: (_spans, done) => done({ code: 0 }),
  shutdown: async () => undefined,
};

function connectorWithSdk(origin: string): HermesConnector {
  return createHermesConnector({
    endpoints: [{ id: ENDPOINT_ID, baseUrl: origin, apiKey: BENCH_API_KEY }],
    tracerProvider: new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(dropEverything)] }),
    meterProvider: new MeterProvider(),
  });
}

export async function benchTelemetry(server: BenchServer, settings: BenchSettings, log: Log): Promise<SectionResult> {
  const plan = settings.quick ? { slices: 6, per: 600 } : { slices: 8, per: 1500 };
  const plain = newConnector(server.origin);
  const traced = connectorWithSdk(server.origin);
  const text = expectedText(STREAM_EVENTS);
  const common = { rounds: settings.rounds, warmupRounds: settings.warmupRounds, beforeRound: () => fullGc(1) };
  try {
    for (const connector of [plain, traced]) await slice(connectorCall(connector), 2000, CONCURRENCY);
    log(`  run_status at concurrency ${CONCURRENCY} and one ${STREAM_EVENTS}-event stream, without and with the SDK, ${settings.rounds} rounds`);
    const requests = await interleave<Slice, 'bare' | 'connector', ConcurrentRound>(
      { bare: () => slice(connectorCall(plain), plan.per, CONCURRENCY), connector: () => slice(connectorCall(traced), plan.per, CONCURRENCY) },
      { ...common, slices: plan.slices, merge: concurrentRound },
    );
    const streams = await interleave<StreamRound, 'bare' | 'connector'>(
      { bare: () => connectorRound(plain, text, false), connector: () => connectorRound(traced, text, false) },
      { rounds: settings.rounds, warmupRounds: settings.warmupRounds, before: () => fullGc(1) },
    );
    const ratio = 'with SDK / no SDK';
    return {
      id: 'telemetry',
      title: 'OpenTelemetry cost (SDK with a dropping exporter vs no SDK)',
      config: { concurrency: CONCURRENCY, slices_per_round: plan.slices, requests_per_slice: plan.per, stream_events: STREAM_EVENTS },
      figures: [
        pairedFigure(
          { id: 'telemetry.concurrent_throughput', label: `run_status throughput, concurrency ${CONCURRENCY}, SDK on`, unit: 'req/s', ratioLabel: ratio },
          requests.rounds.bare.map((round) => round.req_per_s),
          requests.rounds.connector.map((round) => round.req_per_s),
        ),
        pairedFigure(
          { id: 'telemetry.stream_events_per_s', label: `run_events ${STREAM_EVENTS} events, SDK on`, unit: 'events/s', ratioLabel: ratio },
          streams.rounds.bare.map((round) => round.events_per_s),
          streams.rounds.connector.map((round) => round.events_per_s),
        ),
      ],
      rounds: [...requests.records.map((record) => ({ mode: 'requests', ...record })), ...streams.records.map((record) => ({ mode: 'stream', ...record }))],
      errors: [],
    };
  } finally {
    await plain.close();
    await traced.close();
  }
}
