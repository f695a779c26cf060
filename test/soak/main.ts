/**
 * Soak (issue 7, part 4): `npm run soak [-- --seconds N]`.
 *
 * Keeps `--concurrency` (default 200) run lifecycles in flight against the Hermes simulator for
 * `--seconds` (default 10, also when CI=true), through a counting TCP proxy, with random faults:
 * simulator `injectFault` (5xx, 429, destroyed connections), scripts that `cut` the stream, fail,
 * or send bytes that are not SSE, aborts, stops, host cancels and duplicate starts with one
 * idempotency key. Bounded in time (no lifecycle starts after the deadline; every call has an AIP
 * deadline; a watchdog ends a hung run) and in count (`--max-lifecycles`).
 *
 * Then it checks, and prints one line per invariant:
 * - every action got exactly one result (never a rejection), schema-valid, never `internal`;
 * - every run_events call published exactly one final chunk, last, with gapless sequences;
 * - the simulator saw no duplicate start (nor approval, nor stop) for one idempotency key, except
 *   after an answer that proves the earlier attempt did nothing (the ledger frees the key then);
 * - no socket left open (proxy connections after connector.close(), TCP handles after shutdown),
 *   no abort listener left on any caller signal, no MaxListenersExceededWarning;
 * - the heap is back within 20% of its start after GC.
 * The heap baseline is taken after a short warm-up round (schemas compiled, code paths hot).
 * Exit code 0 when every invariant holds, 1 otherwise (2 when the watchdog fired).
 *
 * Options: --seconds N (default 10), --concurrency N (200), --seed N (20261130; the run is
 * repeatable up to timing), --fault-percent N (30: share of lifecycles that arm a simulator
 * fault), --flows a,b (only these flows), --max-lifecycles N (50000).
 *
 * Needs `global.gc`: run with `node --expose-gc --import tsx test/soak/main.ts`; under plain
 * `tsx` (npm run soak) the flag is switched on at run time instead.
 */
import { getEventListeners } from 'node:events';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import {
  createHermesConnector,
  type AipAction,
  type AipActionResult,
  type AipStreamChunk,
  type ApprovalGrant,
  type ExecutionContext,
  type HermesConnector,
} from 'aip-connector-hermes-agent';
import { startHermesSimulator, type HermesSimulator, type RunStep, type SimulatorRoute } from 'aip-connector-hermes-agent/simulator';
import { assertMatches } from '../helpers/schema-check.js';
import { providerKeyOf } from '../helpers/provider-key.js';
import { seededRandom } from '../helpers/seeded-random.js';

// ---- options ---------------------------------------------------------------------------------

function argument(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`);
  return index === -1 ? undefined : process.argv[index + 1];
}

function numberArgument(name: string, fallback: number, min: number, max: number): number {
  const raw = argument(name);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    console.error(`soak: --${name} must be an integer from ${min} to ${max}`);
    process.exit(64);
  }
  return value;
}

const SECONDS = numberArgument('seconds', 10, 1, 3600);
const CONCURRENCY = numberArgument('concurrency', 200, 1, 2000);
const SEED = numberArgument('seed', 20261130, 0, 2 ** 31 - 1);
const MAX_LIFECYCLES = numberArgument('max-lifecycles', 50_000, 1, 10_000_000);
const FAULT_RATE = numberArgument('fault-percent', 30, 0, 100) / 100;
const ONLY_FLOWS = argument('flows')?.split(',');
/** Every call of one lifecycle shares this AIP deadline, so that the soak drains within it after --seconds. */
const LIFECYCLE_DEADLINE_MS = 10_000;
const HEAP_TOLERANCE = 0.2;
const API_KEY = 'hk_soak_key_0123456789abcdef';
const ENDPOINT = 'soak';

// ---- global guards ---------------------------------------------------------------------------

const violations: string[] = [];
const violate = (what: string) => {
  if (violations.length < 200) violations.push(what);
};
const warnings: string[] = [];
process.on('warning', (warning) => {
  if (warning.name === 'MaxListenersExceededWarning') warnings.push(warning.message);
});
process.on('unhandledRejection', (reason) => violate(`unhandled rejection: ${String(reason)}`));
process.on('uncaughtException', (error) => violate(`uncaught exception: ${String(error)}`));

const watchdog = setTimeout(
  () => {
    console.log(`soak: watchdog fired after ${SECONDS + 120} s; violations so far: ${JSON.stringify(violations)}`);
    process.exit(2);
  },
  (SECONDS + 120) * 1000,
);
watchdog.unref();

function collectGarbage(): () => void {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (typeof exposed === 'function') return exposed;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}
const gc = collectGarbage();

async function settledHeap(): Promise<number> {
  for (let round = 0; round < 6; round++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return process.memoryUsage().heapUsed;
}

// ---- a counting TCP proxy between the connector and the simulator ------------------------------

interface Proxy {
  url: string;
  open(): number;
  accepted(): number;
  close(): Promise<void>;
}

async function startProxy(targetPort: number): Promise<Proxy> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server: Server = createServer((client) => {
    accepted++;
    sockets.add(client);
    const upstream = connect(targetPort, '127.0.0.1');
    const finish = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', () => {
      sockets.delete(client);
      upstream.destroy();
    });
    client.on('error', finish);
    upstream.on('error', finish);
    upstream.on('close', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    open: () => sockets.size,
    accepted: () => accepted,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

// ---- one soak round --------------------------------------------------------------------------

interface RoundStats {
  lifecycles: number;
  actions: number;
  streams: number;
  keys: number;
  faults: number;
  requests: number;
  connections: number;
  outcomes: Record<string, number>;
  /** From the first lifecycle to the last one's end (lifecycles in flight at the deadline finish). */
  wallMs: number;
}

const cap = (operation: string) => `cap:hermes_agent:${ENDPOINT}:${operation}`;

function grantFor(input: unknown): ApprovalGrant {
  const now = Date.now();
  return {
    approvalId: `appr_${now}_${Math.random().toString(16).slice(2)}`,
    decision: 'approved',
    grantedAt: now - 1000,
    expiresAt: now + 10 * 60_000,
    evidence: { reason: 'soak', inputSnapshot: structuredClone(input), policyDecision: { policy: 'soak' } },
  };
}

type Flow = 'quick' | 'approve' | 'deny' | 'stop' | 'cancel' | 'abort' | 'fail' | 'cut' | 'garbage' | 'duplicate';
const FLOWS: Flow[] = ['quick', 'approve', 'deny', 'stop', 'cancel', 'abort', 'fail', 'cut', 'garbage', 'duplicate'];

function scriptFor(flow: Flow, random: () => number): RunStep[] {
  const deltas = Array.from({ length: 1 + Math.floor(random() * 4) }, (_, i): RunStep => ({ type: 'delta', text: `part ${i} é😀 ` }));
  switch (flow) {
    case 'approve':
    case 'deny':
      return [...deltas, { type: 'approval', command: 'rm -rf ./scratch' }, { type: 'tool', tool: 'terminal' }, { type: 'complete', output: 'done' }];
    case 'stop':
    case 'cancel':
    case 'abort':
      return [...deltas, { type: 'sleep', ms: 1_500 }, { type: 'complete', output: 'late' }];
    case 'fail':
      return [...deltas, { type: 'fail', error: 'model refused' }];
    case 'cut':
      return [...deltas, { type: 'approval', command: 'ls' }, { type: 'cut' }, { type: 'sleep', ms: 100 }, { type: 'complete', output: 'after cut' }];
    case 'garbage':
      return [...deltas, { type: 'approval', command: 'ls' }, { type: 'raw', data: 'data: {not json}\n\n' }, { type: 'complete' }];
    default:
      return [...deltas, { type: 'complete', output: 'ok' }];
  }
}

async function soakRound(options: { seconds: number; concurrency: number; maxLifecycles: number; seed: number; check: boolean }): Promise<RoundStats> {
  const random = seededRandom(options.seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  const sim: HermesSimulator = await startHermesSimulator({
    apiKey: API_KEY,
    keepaliveMs: 100,
    streamLookupMs: 150,
    approvalTimeoutMs: 1_000,
    maxConcurrentRuns: 0,
  });
  const proxy = await startProxy(sim.port);
  const connector: HermesConnector = createHermesConnector({
    endpoints: [{ id: ENDPOINT, baseUrl: proxy.url, apiKey: API_KEY }],
    limits: { sseIdleTimeoutMs: 5_000 },
  });

  const results = new Map<string, { count: number; operation: string; key?: string; result?: AipActionResult | null }>();
  const streams = new Map<string, AipStreamChunk[]>();
  const signals: AbortSignal[] = [];
  const outcomes: Record<string, number> = {};
  let actionCounter = 0;
  let faults = 0;

  /** `id` is what the soak tracks; `expectedActionId` is what the result must name (cancel() answers for the cancelled action). */
  const record = (operation: string, id: string, expectedActionId: string, result: AipActionResult | null) => {
    const entry = results.get(id);
    if (!entry) return violate(`a result for an action never issued: ${id}`);
    entry.count++;
    entry.result = result;
    if (entry.count > 1) violate(`action ${id} (${operation}) got ${entry.count} results`);
    if (result === null) return;
    if (result.action_id !== expectedActionId) violate(`action ${id} got a result for ${result.action_id}`);
    try {
      assertMatches('aip/action-result.schema.json', result);
    } catch (error) {
      violate(`action ${id} (${operation}): ${String(error).slice(0, 300)}`);
    }
    const code = result.error?.code?.replace('connector.hermes_agent.', '') ?? result.status;
    if (code === 'internal') violate(`action ${id} (${operation}) ended as internal: ${result.error?.message}`);
    const label = `${operation}:${code}`;
    outcomes[label] = (outcomes[label] ?? 0) + 1;
  };

  const issue = async (
    operation: string,
    input: Record<string, unknown>,
    context: ExecutionContext,
    extra: { key?: string; cancel?: AipAction } = {},
  ): Promise<AipActionResult | null> => {
    const action: AipAction = extra.cancel ?? {
      id: `soak_${options.seed}_${++actionCounter}`,
      capability_id: cap(operation),
      input,
      ...(extra.key ? { idempotency_key: extra.key } : {}),
    };
    const id = extra.cancel ? `${action.id}#cancel` : action.id;
    results.set(id, { count: 0, operation, key: extra.key });
    const full: ExecutionContext = { ...context };
    const t0 = Date.now();
    try {
      const result = extra.cancel ? await connector.cancel(action, full) : await connector.invoke(action, full);
      timing(operation, Date.now() - t0);
      record(operation, id, action.id, result);
      return result;
    } catch (error) {
      violate(`${operation} ${id} rejected: ${String(error)}`);
      return null;
    }
  };

  const timings = new Map<string, number[]>();
  const timing = (label: string, ms: number) => {
    const list = timings.get(label) ?? [];
    list.push(ms);
    timings.set(label, list);
  };
  latencies = timings;

  const injectRandomFault = () => {
    if (random() >= FAULT_RATE) return;
    const route = pick<SimulatorRoute>(['start', 'status', 'events', 'approval', 'stop']);
    const kind = pick(['500', '503', 'destroy', '429']);
    faults++;
    if (kind === 'destroy') sim.injectFault({ route, destroy: true });
    else {
      const status = Number(kind);
      const code = status === 429 ? 'rate_limit_exceeded' : 'internal_error';
      sim.injectFault({
        route,
        response: {
          status,
          headers: status === 429 ? { 'Retry-After': '1' } : {},
          body: JSON.stringify({ error: { message: 'injected', type: 'server_error', param: null, code } }),
        },
      });
    }
  };

  const lifecycle = async () => {
    const flow = pick(ONLY_FLOWS ? FLOWS.filter((name) => ONLY_FLOWS.includes(name)) : FLOWS);
    const controller = new AbortController();
    signals.push(controller.signal);
    const deadline = Date.now() + LIFECYCLE_DEADLINE_MS;
    const base: ExecutionContext = { signal: controller.signal, traceId: `trace-${actionCounter}`, deadline };
    injectRandomFault();
    const key = `key_${options.seed}_${actionCounter}_${Math.floor(random() * 1e9)}`;
    const body = { input: `soak ${flow}`, sim_script: scriptFor(flow, random) };
    const starts =
      flow === 'duplicate'
        ? [issue('run_start', { body }, base, { key }), issue('run_start', { body }, base, { key })]
        : [issue('run_start', { body }, base, { key })];
    const started = (await Promise.all(starts)).find((result) => result?.status === 'completed');
    if (!started) return;
    const runId = (started.output as { run_id: string }).run_id;
    // Resubmitting a started run's key replays it and sends nothing.
    if (random() < 0.1) await issue('run_start', { body }, base, { key });
    let acted = false;
    const eventsInput = { run_id: runId };
    const onChunk = async (chunk: AipStreamChunk) => {
      if (acted) return;
      if (chunk.kind === 'pending_approval' && flow !== 'stop' && flow !== 'cancel' && flow !== 'abort') {
        acted = true;
        const input = { run_id: runId, choice: flow === 'deny' ? 'deny' : 'once' };
        await issue('run_approval', input, { ...base, approval: grantFor(input) }, { key: `${key}-approval` });
      } else if (chunk.kind === 'data' && flow === 'stop') {
        acted = true;
        const input = { run_id: runId };
        await issue('run_stop', input, { ...base, approval: grantFor(input) }, { key: `${key}-stop` });
      } else if (chunk.kind === 'data' && flow === 'cancel') {
        acted = true;
        await issue('run_stop', eventsInput, base, { cancel: eventsAction });
      } else if (chunk.kind === 'data' && flow === 'abort') {
        acted = true;
        controller.abort(new Error('soak abort'));
      }
    };
    const eventsAction: AipAction = { id: `soak_${options.seed}_${++actionCounter}`, capability_id: cap('run_events'), input: eventsInput };
    results.set(eventsAction.id, { count: 0, operation: 'run_events' });
    const chunks: AipStreamChunk[] = [];
    streams.set(eventsAction.id, chunks);
    const eventsStarted = Date.now();
    try {
      const result = await connector.invoke(eventsAction, {
        ...base,
        onChunk: async (chunk) => {
          chunks.push(chunk);
          try {
            assertMatches('aip/stream-chunk.schema.json', chunk);
          } catch (error) {
            violate(`chunk of ${eventsAction.id}: ${String(error).slice(0, 300)}`);
          }
          await onChunk(chunk);
        },
      });
      timing('run_events', Date.now() - eventsStarted);
      record('run_events', eventsAction.id, eventsAction.id, result);
    } catch (error) {
      violate(`run_events ${eventsAction.id} rejected: ${String(error)}`);
    }
    if (flow === 'abort') await issue('run_stop', eventsInput, { deadline }, { cancel: eventsAction });
    await issue('run_status', { run_id: runId }, flow === 'abort' ? { deadline } : base);
  };

  const endAt = Date.now() + options.seconds * 1000;
  let lifecycles = 0;
  const worker = async () => {
    while (Date.now() < endAt && lifecycles < options.maxLifecycles) {
      lifecycles++;
      try {
        await lifecycle();
      } catch (error) {
        violate(`lifecycle threw: ${String(error)}`);
      }
    }
  };
  const began = Date.now();
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  const drainedAt = Date.now();

  const stats: RoundStats = {
    lifecycles,
    actions: results.size,
    streams: streams.size,
    keys: 0,
    faults,
    requests: sim.requests.length,
    connections: proxy.accepted(),
    outcomes,
    wallMs: drainedAt - began,
  };

  if (options.check) {
    // Every action: exactly one result.
    const missing = [...results].filter(([, entry]) => entry.count !== 1);
    report(
      'one-result-per-action',
      missing.length === 0,
      `${results.size} actions`,
      missing.slice(0, 5).map(([id, entry]) => `${id} (${entry.operation}) got ${entry.count}`),
    );

    // Every stream: exactly one final chunk, last, sequences without gaps.
    const badStreams: string[] = [];
    for (const [id, chunks] of streams) {
      const finals = chunks.filter((chunk) => chunk.kind === 'done' || chunk.kind === 'error');
      const gapless = chunks.every((chunk, index) => chunk.sequence === index && chunk.action_id === id);
      if (finals.length !== 1 || chunks.at(-1) !== finals[0] || !gapless)
        badStreams.push(`${id}: ${chunks.map((chunk) => `${chunk.sequence}:${chunk.kind}`).join(' ')}`);
    }
    report('one-final-chunk-per-stream', badStreams.length === 0, `${streams.size} streams`, badStreams.slice(0, 5));

    // Idempotency: one POST per key, unless an answer proved that the earlier attempt did nothing.
    const posts = new Map<string, number>();
    for (const request of sim.requests) {
      const key = request.headers['idempotency-key'];
      if (request.method === 'POST' && typeof key === 'string') posts.set(key, (posts.get(key) ?? 0) + 1);
    }
    // The ledger frees a key after an outcome that is neither completed nor uncertain: only then may it be sent again.
    const freed = new Map<string, number>();
    for (const entry of results.values()) {
      const result = entry.result;
      if (!entry.key || !result || result.status === 'completed' || result.error?.details?.uncertain_outcome === true) continue;
      const sentAs = providerKeyOf(cap(entry.operation), entry.key);
      freed.set(sentAs, (freed.get(sentAs) ?? 0) + 1);
    }
    const duplicates = [...posts].filter(([key, count]) => count > 1 + (freed.get(key) ?? 0));
    stats.keys = posts.size;
    report(
      'no-duplicate-start-per-key',
      duplicates.length === 0,
      `${posts.size} keys, ${[...posts.values()].reduce((a, b) => a + b, 0)} POSTs`,
      duplicates.slice(0, 5).map(([key, count]) => `${key}: ${count} POSTs`),
    );
  }

  await connector.close();
  // The connector's sockets (spare idle ones included) are gone once close() resolves.
  let open = proxy.open();
  for (let attempt = 0; attempt < 200 && open > 0; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    open = proxy.open();
  }
  const leftListeners = signals.reduce((sum, signal) => sum + getEventListeners(signal, 'abort').length, 0);
  await sim.close();
  await proxy.close();
  if (options.check) {
    report(
      'no-open-socket-after-close',
      open === 0,
      `${stats.connections} connections accepted`,
      open === 0 ? [] : [`${open} proxy connection(s) still open after connector.close()`],
    );
    report(
      'no-listener-left',
      leftListeners === 0,
      `${signals.length} caller signals`,
      leftListeners === 0 ? [] : [`${leftListeners} abort listener(s) left on caller signals`],
    );
  }
  return stats;
}

// ---- reporting -------------------------------------------------------------------------------

let latencies = new Map<string, number[]>();
const invariants: Array<{ name: string; ok: boolean }> = [];
function report(name: string, ok: boolean, summary: string, details: string[] = []): void {
  invariants.push({ name, ok });
  console.log(`invariant ${name}: ${ok ? 'ok' : 'VIOLATED'} (${summary})`);
  for (const detail of details) console.log(`  ${detail}`);
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

async function main(): Promise<void> {
  console.log(`soak: seed=${SEED} seconds=${SECONDS} concurrency=${CONCURRENCY} max-lifecycles=${MAX_LIFECYCLES} node=${process.version}`);
  // Warm-up: the same code paths once, so that the baseline holds compiled code and loaded schemas.
  const warm = await soakRound({ seconds: 1, concurrency: Math.min(CONCURRENCY, 20), maxLifecycles: 100, seed: SEED + 1, check: false });
  console.log(`soak: warm-up ${warm.lifecycles} lifecycles in ${(warm.wallMs / 1000).toFixed(1)} s`);
  const heapStart = await settledHeap();

  const stats = await soakRound({ seconds: SECONDS, concurrency: CONCURRENCY, maxLifecycles: MAX_LIFECYCLES, seed: SEED, check: true });
  console.log(
    `soak: ${stats.lifecycles} lifecycles, ${stats.actions} actions, ${stats.streams} streams, ${stats.faults} injected faults, ${stats.requests} requests over ${stats.connections} connections, ${(stats.wallMs / 1000).toFixed(1)} s`,
  );
  const latency = [...latencies].sort().map(([label, list]) => {
    list.sort((a, b) => a - b);
    return `${label} p50 ${list[Math.floor(list.length / 2)]} ms, max ${list.at(-1)} ms`;
  });
  console.log(`soak: latency ${latency.join('; ')}`);
  console.log(`soak: outcomes ${JSON.stringify(Object.fromEntries(Object.entries(stats.outcomes).sort()))}`);

  // Everything is closed: no TCP handle may remain.
  await new Promise((resolve) => setTimeout(resolve, 50));
  const handles = process.getActiveResourcesInfo().filter((type) => type === 'TCPSocketWrap' || type === 'TCPServerWrap' || type === 'TCPWRAP');
  report('no-tcp-handle-after-shutdown', handles.length === 0, 'process.getActiveResourcesInfo()', handles.length === 0 ? [] : [`left: ${handles.join(', ')}`]);
  report('no-max-listeners-warning', warnings.length === 0, `${warnings.length} warning(s)`, [...new Set(warnings)].slice(0, 5));
  report('no-unhandled-rejection-or-exception', !violations.some((v) => v.startsWith('unhandled') || v.startsWith('uncaught')), 'process handlers');

  const heapEnd = await settledHeap();
  const growth = (heapEnd - heapStart) / heapStart;
  report(
    'heap-recovered',
    growth <= HEAP_TOLERANCE,
    `start ${mb(heapStart)}, end ${mb(heapEnd)}, ${(growth * 100).toFixed(1)}% (limit ${HEAP_TOLERANCE * 100}%)`,
  );

  if (violations.length > 0) {
    console.log(`soak: ${violations.length} violation(s) recorded during the run:`);
    for (const violation of violations.slice(0, 20)) console.log(`  ${violation}`);
  }
  const failed = invariants.filter((invariant) => !invariant.ok).length + (violations.length > 0 ? 1 : 0);
  console.log(failed === 0 ? 'soak: PASS' : `soak: FAIL (${failed})`);
  process.exitCode = failed === 0 ? 0 : 1;
}

main().catch((error: unknown) => {
  console.log(`soak: crashed: ${String(error)}`);
  process.exitCode = 1;
});
