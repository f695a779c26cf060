/**
 * 4. Scale of discovery: `createHermesConnector` + `capabilities()` with 1, 100 and 1,000
 * endpoints. No I/O happens (pools open on first use), so the endpoints point at unused
 * loopback ports. Each measurement repeats create + capabilities() until a time budget is
 * spent and divides by iterations x endpoints; sizes take turns within every round. The very
 * first call of the process is timed on its own: it is the only one that reads and compiles
 * the schemas. Must run before anything else creates a connector.
 */
import { performance } from 'node:perf_hooks';
import { createHermesConnector, type HermesEndpointConfig } from 'aip-connector-hermes-agent';
import { fullGc } from './heap.js';
import type { BenchSettings, Figure, Log, SectionResult } from './report.js';
import { BENCH_API_KEY } from './servers.js';
import { interleave, pairedRatios, summarize } from './stats.js';

export const SIZES = [1, 100, 1000] as const;
const OPERATIONS_PER_ENDPOINT = 5;

interface SizeRound {
  endpoints: number;
  iterations: number;
  ms_per_call: number;
  us_per_endpoint: number;
}

function endpointsOf(count: number): HermesEndpointConfig[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `ep-${i}`,
    baseUrl: `http://127.0.0.1:${20000 + i}`,
    apiKey: BENCH_API_KEY,
    displayName: `Hermes ${i}`,
  }));
}

function discover(endpoints: HermesEndpointConfig[]) {
  const connector = createHermesConnector({ endpoints });
  const capabilities = connector.capabilities();
  if (capabilities.length !== endpoints.length * OPERATIONS_PER_ENDPOINT)
    throw new Error(`expected ${endpoints.length * OPERATIONS_PER_ENDPOINT} capabilities, got ${capabilities.length}`);
  return { connector, capabilities };
}

async function measureSize(endpoints: HermesEndpointConfig[], budgetMs: number): Promise<SizeRound> {
  let timed = 0;
  let iterations = 0;
  while (timed < budgetMs || iterations < 2) {
    const started = performance.now();
    const { connector } = discover(endpoints);
    timed += performance.now() - started;
    iterations++;
    await connector.close();
  }
  const msPerCall = timed / iterations;
  return { endpoints: endpoints.length, iterations, ms_per_call: msPerCall, us_per_endpoint: (msPerCall * 1000) / endpoints.length };
}

export async function benchDiscovery(settings: BenchSettings, log: Log): Promise<SectionResult> {
  const inputs = new Map(SIZES.map((size) => [size, endpointsOf(size)]));
  const started = performance.now();
  const cold = discover(inputs.get(1) as HermesEndpointConfig[]);
  const coldMs = performance.now() - started;
  await cold.connector.close();

  // Compiled once: every endpoint of every connector points at the same schema objects.
  const a = discover(inputs.get(1000) as HermesEndpointConfig[]);
  const b = discover(inputs.get(100) as HermesEndpointConfig[]);
  const shared = a.capabilities.every((capability, i) => {
    const twin = b.capabilities[i % b.capabilities.length];
    return twin !== undefined && capability.input_schema === twin.input_schema && capability.output_schema === twin.output_schema;
  });
  await a.connector.close();
  await b.connector.close();

  const budgetMs = settings.quick ? 60 : 200;
  log(`  ${settings.rounds} rounds x sizes ${SIZES.join(', ')}, ${budgetMs} ms of calls per size per round`);
  const { rounds, records } = await interleave<SizeRound, 'size_1' | 'size_100' | 'size_1000'>(
    {
      size_1: () => measureSize(inputs.get(1) as HermesEndpointConfig[], budgetMs),
      size_100: () => measureSize(inputs.get(100) as HermesEndpointConfig[], budgetMs),
      size_1000: () => measureSize(inputs.get(1000) as HermesEndpointConfig[], budgetMs),
    },
    { rounds: settings.rounds, warmupRounds: settings.warmupRounds, before: () => fullGc(1) },
  );
  const perEndpoint = (key: keyof typeof rounds) => rounds[key].map((round) => round.us_per_endpoint);
  const figures: Figure[] = SIZES.map((size) => ({
    id: `discovery.per_endpoint_${size}`,
    label: `create + capabilities(), ${size} endpoint${size === 1 ? '' : 's'}: time per endpoint`,
    unit: 'us',
    connector: summarize(perEndpoint(`size_${size}`)),
    note: `${summarize(rounds[`size_${size}`].map((round) => round.ms_per_call)).median.toFixed(3)} ms per call`,
  }));
  figures.push({
    id: 'discovery.scaling_1000_vs_100',
    label: 'per-endpoint time, 1,000 vs 100 endpoints',
    unit: '',
    ratio: summarize(pairedRatios(perEndpoint('size_1000'), perEndpoint('size_100'))),
    ratioLabel: 'per endpoint at 1,000 / per endpoint at 100',
    target: { op: '<=', value: 2, judgedOn: 'median' },
    note: `first call of the process (1 endpoint, compiles the schemas): ${coldMs.toFixed(1)} ms; schema objects shared by all endpoints and connectors: ${shared ? 'yes' : 'NO'}`,
  });
  return {
    id: 'discovery',
    title: 'Scale of discovery',
    config: { sizes: [...SIZES], budget_ms_per_measurement: budgetMs, cold_first_call_ms: coldMs, schemas_shared: shared },
    figures,
    rounds: records,
    errors: shared ? [] : ['capabilities of different endpoints or connectors do not share their schema objects (compiled more than once?)'],
  };
}
