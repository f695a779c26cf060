/**
 * 1. Request overhead: `run_status` through `connector.invoke` against bare `undici.request` +
 * `JSON.parse` of the same response from the same server, sequentially (latency: p50 and p99,
 * each round over at least 10,000 calls per side) and with 64 requests in flight (throughput).
 * Throughput has a second baseline, reported as context without a target: the Pool's own
 * `dispatch()` with a minimal handler that collects the body and parses it at the end (clients.ts,
 * `bareDispatchStatus`), a floor that enforces no contract. What the connector itself adds per call
 * is judged by the pipeline section (pipeline-cost.ts), free of the loopback's noise.
 */
import { performance } from 'node:perf_hooks';
import type { Dispatcher, Pool } from 'undici';
import type { HermesConnector } from 'aip-connector-hermes-agent';
import { bareDispatchStatus, bareStatus, capabilityId, newBarePool, newConnector } from './clients.js';
import { fullGc } from './heap.js';
import { CPU_RATIO_LABEL, pairedFigure, type BenchSettings, type Figure, type Log, type SectionResult } from './report.js';
import { STATUS_RUN_ID, type BenchServer } from './servers.js';
import { cpuMicros, interleave, mean, quantile } from './stats.js';

export const CONCURRENCY = 64;
/** Calls per side, sequential and concurrent, before any measured or warm-up round. */
const WARMUP_CALLS = 2000;
/** The fewest sequential calls per side in one round: its p99 is then the 100th slowest call, or slower. */
export const MIN_SEQUENTIAL_CALLS = 10_000;

export interface Slice {
  requests: number;
  seconds: number;
  cpu_us: number;
  latencies_us: number[];
}

interface SequentialRound {
  requests: number;
  p50_us: number;
  p90_us: number;
  p99_us: number;
  mean_us: number;
  /** Client process CPU (user + system, all threads) per request; the server is another process. */
  cpu_us_per_request: number;
}

export interface ConcurrentRound {
  requests: number;
  concurrency: number;
  seconds: number;
  req_per_s: number;
  p50_us: number;
  cpu_us_per_request: number;
}

type Call = () => Promise<void>;

/** `requests` calls with `concurrency` of them in flight (1 = sequential). */
export async function slice(call: Call, requests: number, concurrency: number): Promise<Slice> {
  const latencies = new Array<number>(requests);
  let next = 0;
  const worker = async () => {
    while (next < requests) {
      const index = next++;
      const started = performance.now();
      await call();
      latencies[index] = (performance.now() - started) * 1000;
    }
  };
  const cpu = process.cpuUsage();
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  return { requests, seconds, cpu_us: cpuMicros(cpu), latencies_us: latencies };
}

function totals(slices: Slice[]) {
  const latencies = slices.flatMap((part) => part.latencies_us);
  const requests = slices.reduce((sum, part) => sum + part.requests, 0);
  const seconds = slices.reduce((sum, part) => sum + part.seconds, 0);
  const cpu = slices.reduce((sum, part) => sum + part.cpu_us, 0);
  return { latencies, requests, seconds, cpuPerRequest: cpu / requests };
}

function sequentialRound(slices: Slice[]): SequentialRound {
  const { latencies, requests, cpuPerRequest } = totals(slices);
  return {
    requests,
    p50_us: quantile(latencies, 0.5),
    p90_us: quantile(latencies, 0.9),
    p99_us: quantile(latencies, 0.99),
    mean_us: mean(latencies),
    cpu_us_per_request: cpuPerRequest,
  };
}

export function concurrentRound(slices: Slice[]): ConcurrentRound {
  const { latencies, requests, seconds, cpuPerRequest } = totals(slices);
  return { requests, concurrency: CONCURRENCY, seconds, req_per_s: requests / seconds, p50_us: quantile(latencies, 0.5), cpu_us_per_request: cpuPerRequest };
}

let actionCounter = 0;

export function connectorCall(connector: HermesConnector): Call {
  const capability_id = capabilityId('run_status');
  return async () => {
    const result = await connector.invoke({ id: `act_bench_${++actionCounter}`, capability_id, input: { run_id: STATUS_RUN_ID } });
    if (result.status !== 'completed' || (result.output as { run_id?: unknown }).run_id !== STATUS_RUN_ID) {
      throw new Error(`connector run_status did not complete: ${result.error?.code ?? result.status}`);
    }
  };
}

function bareCall(pool: Pool, origin: string): Call {
  return async () => {
    const status = (await bareStatus(pool, origin, STATUS_RUN_ID)) as { run_id?: unknown };
    if (status.run_id !== STATUS_RUN_ID) throw new Error('bare run_status read the wrong body');
  };
}

export function bareDispatchCall(pool: Dispatcher, origin: string): Call {
  return async () => {
    const status = (await bareDispatchStatus(pool, origin, STATUS_RUN_ID)) as { run_id?: unknown };
    if (status.run_id !== STATUS_RUN_ID) throw new Error('bare dispatch run_status read the wrong body');
  };
}

export async function benchRequestOverhead(server: BenchServer, settings: BenchSettings, log: Log): Promise<SectionResult> {
  // Per round and side: `slices` slices of `per` requests, the sides alternating slice by slice.
  // Sequential rounds are as long in --quick as in a full run: the p99 needs its 10,000 calls.
  const sequentialPlan = { slices: 10, per: MIN_SEQUENTIAL_CALLS / 10 };
  const concurrentPlan = settings.quick ? { slices: 6, per: 600 } : { slices: 8, per: 1500 };
  const connector = newConnector(server.origin);
  const pool = newBarePool(server.origin);
  const dispatchPool = newBarePool(server.origin);
  const viaConnector = connectorCall(connector);
  const viaBare = bareCall(pool, server.origin);
  const viaDispatch = bareDispatchCall(dispatchPool, server.origin);
  // One full GC per round; within it, collections fall where allocation triggers them, i.e. in proportion to each side's garbage.
  const common = { rounds: settings.rounds, warmupRounds: settings.warmupRounds, beforeRound: () => fullGc(1) };
  try {
    // The connector runs more code than the bare path and needs more calls before V8 has optimized
    // it; the same warm-up for --quick and full runs keeps the short rounds of --quick comparable.
    for (const call of [viaBare, viaDispatch, viaConnector]) {
      await slice(call, WARMUP_CALLS, 1);
      await slice(call, WARMUP_CALLS, CONCURRENCY);
    }
    log(`  sequential: ${settings.rounds} rounds x ${sequentialPlan.slices} alternating slices x ${sequentialPlan.per} requests per side`);
    const sequential = await interleave<Slice, 'bare' | 'connector', SequentialRound>(
      { bare: () => slice(viaBare, sequentialPlan.per, 1), connector: () => slice(viaConnector, sequentialPlan.per, 1) },
      { ...common, slices: sequentialPlan.slices, merge: sequentialRound },
    );
    log(`  concurrency ${CONCURRENCY}: ${settings.rounds} rounds x ${concurrentPlan.slices} alternating slices x ${concurrentPlan.per} requests per side`);
    const concurrent = await interleave<Slice, 'bare' | 'bare_dispatch' | 'connector', ConcurrentRound>(
      {
        bare: () => slice(viaBare, concurrentPlan.per, CONCURRENCY),
        bare_dispatch: () => slice(viaDispatch, concurrentPlan.per, CONCURRENCY),
        connector: () => slice(viaConnector, concurrentPlan.per, CONCURRENCY),
      },
      { ...common, slices: concurrentPlan.slices, merge: concurrentRound },
    );
    const seq = (side: 'bare' | 'connector', key: keyof SequentialRound) => sequential.rounds[side].map((round) => round[key]);
    const con = (side: 'bare' | 'bare_dispatch' | 'connector', key: keyof ConcurrentRound) => concurrent.rounds[side].map((round) => round[key]);
    const figures: Figure[] = [
      pairedFigure(
        { id: 'request.sequential_p50', label: 'run_status p50 latency, sequential', unit: 'us', target: { op: '<=', value: 1.05, judgedOn: 'median' } },
        seq('bare', 'p50_us'),
        seq('connector', 'p50_us'),
      ),
      pairedFigure(
        {
          id: 'request.sequential_p99',
          label: `run_status p99 latency, sequential (${MIN_SEQUENTIAL_CALLS.toLocaleString('en-US')} calls per side and round)`,
          unit: 'us',
          target: { op: '<=', value: 1.3, judgedOn: 'median' },
        },
        seq('bare', 'p99_us'),
        seq('connector', 'p99_us'),
      ),
      pairedFigure(
        { id: 'request.sequential_cpu', label: 'run_status client CPU per request, sequential', unit: 'us', ratioLabel: CPU_RATIO_LABEL },
        seq('bare', 'cpu_us_per_request'),
        seq('connector', 'cpu_us_per_request'),
      ),
      pairedFigure(
        {
          id: 'request.concurrent_throughput_dispatch',
          label: `run_status throughput, concurrency ${CONCURRENCY}, vs bare dispatch()`,
          unit: 'req/s',
          ratioLabel: 'connector / bare Pool#dispatch() with a minimal handler',
        },
        con('bare_dispatch', 'req_per_s'),
        con('connector', 'req_per_s'),
      ),
      pairedFigure(
        {
          id: 'request.concurrent_throughput',
          label: `run_status throughput, concurrency ${CONCURRENCY}, vs bare request()`,
          unit: 'req/s',
          target: { op: '>=', value: 1, judgedOn: 'median' },
        },
        con('bare', 'req_per_s'),
        con('connector', 'req_per_s'),
      ),
      pairedFigure(
        { id: 'request.concurrent_p50', label: `run_status p50 latency, concurrency ${CONCURRENCY}`, unit: 'us' },
        con('bare', 'p50_us'),
        con('connector', 'p50_us'),
      ),
      pairedFigure(
        { id: 'request.concurrent_cpu', label: `run_status client CPU per request, concurrency ${CONCURRENCY}`, unit: 'us', ratioLabel: CPU_RATIO_LABEL },
        con('bare', 'cpu_us_per_request'),
        con('connector', 'cpu_us_per_request'),
      ),
      pairedFigure(
        {
          id: 'request.concurrent_cpu_dispatch',
          label: `run_status client CPU per request, concurrency ${CONCURRENCY}, vs bare dispatch()`,
          unit: 'us',
          ratioLabel: 'connector / bare dispatch() (user + system CPU of the client process)',
        },
        con('bare_dispatch', 'cpu_us_per_request'),
        con('connector', 'cpu_us_per_request'),
      ),
    ];
    return {
      id: 'request_overhead',
      title: 'Request overhead (run_status)',
      config: {
        sequential: { slices_per_round: sequentialPlan.slices, requests_per_slice: sequentialPlan.per },
        concurrent: { slices_per_round: concurrentPlan.slices, requests_per_slice: concurrentPlan.per, concurrency: CONCURRENCY },
      },
      figures,
      rounds: [
        ...sequential.records.map((record) => ({ mode: 'sequential', ...record })),
        ...concurrent.records.map((record) => ({ mode: `concurrency_${CONCURRENCY}`, ...record })),
      ],
      errors: [],
    };
  } finally {
    await connector.close();
    await pool.close();
    await dispatchPool.close();
  }
}
