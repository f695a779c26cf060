/**
 * Secret canary (issue 7, part 3). A random canary API key and a canary tenant go through the
 * whole lifecycle and every failure path reachable from a test: 401, 404, 409, 429, 5xx,
 * transport (reset and refused), invalid_response, a cut stream, refused approvals, tenant
 * mismatch, deadline, cancellation, idempotency replay and conflict, redirects, and a hostile
 * provider that reflects the Authorization header back in its answers. pino logs at `trace`
 * into a buffer. The key must appear in no log line, no result, no chunk, no error, no
 * manifest or capability, no evidence, no util.inspect of the connector or of anything it
 * returned or threw, and no JSON of any of these.
 *
 * The key is proven to be in use: the simulator receives it as the Bearer token.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { inspect } from 'node:util';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ConnectorConfigError,
  createHermesConnector,
  type AipAction,
  type AipActionResult,
  type AipStreamChunk,
  type ExecutionContext,
  type RunEventsOutput,
  type HermesConnector,
} from 'aip-connector-hermes-agent';
import { startHermesSimulator, type HermesSimulator } from 'aip-connector-hermes-agent/simulator';
import {
  JSON_TYPE,
  SSE_TYPE,
  byRoute,
  redirectTo,
  resetBeforeHeaders,
  respondStatus,
  startFaultServer,
  type FaultExchange,
  type FaultHandler,
  type FaultServer,
} from '../helpers/fault-server.js';
import { grantFor, nextId, PREFIX } from './support.js';

/**
 * Shaped like a Hermes error code (lowercase snake_case), so that the connector's provider-code
 * shape filter alone cannot hide a reflected key: only a real secret check can.
 */
const CANARY_KEY = `sk_canary_${randomBytes(16).toString('hex')}`;
const CANARY_TENANT = `tenant-canary-${randomBytes(8).toString('hex')}`;
const OTHER_KEY = `hk_other_key_${randomBytes(8).toString('hex')}`;

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** Everything the suite saw, to be searched for the key. */
class Evidence {
  readonly items: Array<{ what: string; value: unknown }> = [];
  add(what: string, value: unknown): void {
    this.items.push({ what, value });
  }
  /** Every place the key was found: JSON, util.inspect (hidden properties too) and String(). */
  leaks(secret: string): string[] {
    const found: string[] = [];
    for (const { what, value } of this.items) {
      const views: Array<[string, () => string]> = [
        ['json', () => JSON.stringify(value) ?? ''],
        ['inspect', () => inspect(value, { depth: Infinity, showHidden: true, getters: true, maxArrayLength: Infinity, maxStringLength: Infinity })],
        ['string', () => String(value)],
      ];
      for (const [view, render] of views) {
        let text: string;
        try {
          text = render();
        } catch {
          continue;
        }
        if (!text.includes(secret)) continue;
        const paths = view === 'json' ? pathsTo(value, secret) : [];
        found.push(`${what} (${view}${paths.length > 0 ? `: ${paths.join(', ')}` : ''})`);
      }
    }
    return found;
  }
}

/** The JSON paths of every string under `value` that contains `secret` (keys included). */
function pathsTo(value: unknown, secret: string, path = '$', seen = new Set<unknown>()): string[] {
  if (typeof value === 'string') return value.includes(secret) ? [path] : [];
  if (value === null || typeof value !== 'object' || seen.has(value)) return [];
  seen.add(value);
  return Object.entries(value).flatMap(([key, item]) => [...(key.includes(secret) ? [`${path} (key)`] : []), ...pathsTo(item, secret, `${path}.${key}`, seen)]);
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A provider that reflects the request's Authorization value into everything it answers. */
const reflector: FaultHandler = (exchange) => {
  const authorization = exchange.request.headers.authorization ?? '';
  const token = authorization.replace(/^Bearer /, '');
  const path = exchange.request.target;
  if (path.endsWith('/events')) {
    return exchange.respond(401, JSON.stringify({ error: { message: `Invalid API key ${authorization}`, type: 'invalid_request_error', code: token } }), {
      'Content-Type': JSON_TYPE,
      'WWW-Authenticate': `Bearer realm="${token}"`,
    });
  }
  if (path.includes('redirect')) return redirectTo(302, `http://127.0.0.1:1/steal?key=${encodeURIComponent(token)}`)(exchange);
  const status = exchange.request.method === 'POST' ? 500 : 429;
  return exchange.respond(status, JSON.stringify({ error: { message: authorization, type: 'server_error', param: token, code: token } }), {
    'Content-Type': JSON_TYPE,
    'Retry-After': '1',
    'X-Echo-Authorization': authorization,
  });
};

interface Setup {
  connector: HermesConnector;
  sim: HermesSimulator;
  stale: HermesSimulator;
  hostile: FaultServer;
  lines: string[];
  evidence: Evidence;
  cap(endpoint: string, operation: string): string;
  invoke(action: Partial<AipAction> & { capability_id: string; input: unknown }, context?: ExecutionContext): Promise<AipActionResult>;
  cancel(action: Partial<AipAction> & { capability_id: string; input: unknown }, context?: ExecutionContext): Promise<AipActionResult | null>;
}

async function setup(): Promise<Setup> {
  const lines: string[] = [];
  const logger = pino({ level: 'trace' }, { write: (line: string) => void lines.push(line) });
  const sim = await startHermesSimulator({ apiKey: CANARY_KEY, keepaliveMs: 100, streamLookupMs: 100, maxConcurrentRuns: 0 });
  closers.push(() => sim.close());
  // Another Hermes whose key is not the canary: the canary is refused there (401).
  const stale = await startHermesSimulator({ apiKey: OTHER_KEY, streamLookupMs: 100 });
  closers.push(() => stale.close());
  const hostile = await startFaultServer(byRoute({ events: reflector, status: reflector, other: reflector }));
  closers.push(() => hostile.close());
  const refusedPort = await closedPort();
  const endpoint = (id: string, baseUrl: string) => ({ id, baseUrl, apiKey: CANARY_KEY, tenantId: CANARY_TENANT, displayName: `Hermes ${id}` });
  const connector = createHermesConnector({
    endpoints: [
      endpoint('main', sim.url),
      endpoint('stale', stale.url),
      endpoint('hostile', hostile.url),
      endpoint('refused', `http://127.0.0.1:${refusedPort}`),
    ],
    logger,
    limits: { maxJsonResponseBytes: 4096, sseIdleTimeoutMs: 2000 },
  });
  closers.push(() => connector.close());
  const evidence = new Evidence();
  const trusted = (context: ExecutionContext = {}): ExecutionContext => ({
    tenantId: CANARY_TENANT,
    traceId: 'trace-canary',
    actor: { principalId: 'user:canary' },
    ...context,
  });
  const chunksFor =
    (actionId: string): ExecutionContext['onChunk'] =>
    (chunk: AipStreamChunk) =>
      evidence.add(`chunk of ${actionId}`, chunk);
  return {
    connector,
    sim,
    stale,
    hostile,
    lines,
    evidence,
    cap: (endpointId, operation) => `cap:hermes_agent:${endpointId}:${operation}`,
    async invoke(partial, context) {
      const action = { id: nextId('canary'), ...partial } as AipAction;
      const outer = context?.onChunk;
      const onChunk = chunksFor(action.id);
      let result: AipActionResult;
      try {
        result = await connector.invoke(
          action,
          trusted({
            ...context,
            onChunk: async (chunk) => {
              onChunk?.(chunk);
              await outer?.(chunk);
            },
          }),
        );
      } catch (error) {
        evidence.add(`rejection of ${action.id}`, error);
        throw error;
      }
      evidence.add(`result of ${action.id}`, result);
      return result;
    },
    async cancel(partial, context) {
      const action = { id: nextId('canary'), ...partial } as AipAction;
      const result = await connector.cancel(action, trusted(context));
      evidence.add(`cancel result of ${action.id}`, result);
      return result;
    },
  };
}

const codeOf = (result: AipActionResult | null) => result?.error?.code?.slice(PREFIX.length) ?? result?.status;

describe('secret canary: the API key appears nowhere but in the Authorization header', () => {
  it('through the whole lifecycle and every reachable failure path', async () => {
    const s = await setup();
    const { connector, sim, invoke, cancel, cap, evidence } = s;
    const codes: Record<string, unknown> = {};
    const start = async (endpoint: string, body: Record<string, unknown>, key = nextId('key'), context?: ExecutionContext) =>
      invoke({ capability_id: cap(endpoint, 'run_start'), input: { body }, idempotency_key: key }, context);
    const status = (endpoint: string, runId: string, context?: ExecutionContext) =>
      invoke({ capability_id: cap(endpoint, 'run_status'), input: { run_id: runId } }, context);
    const events = (endpoint: string, runId: string, context?: ExecutionContext) =>
      invoke({ capability_id: cap(endpoint, 'run_events'), input: { run_id: runId } }, context);
    const approve = (endpoint: string, runId: string, withGrant = true) => {
      const input = { run_id: runId, choice: 'once' };
      return invoke({ capability_id: cap(endpoint, 'run_approval'), input, idempotency_key: nextId('key') }, withGrant ? { approval: grantFor(input) } : {});
    };
    const stop = (endpoint: string, runId: string) => {
      const input = { run_id: runId };
      return invoke({ capability_id: cap(endpoint, 'run_stop'), input, idempotency_key: nextId('key') }, { approval: grantFor(input) });
    };
    const runIdOf = (result: AipActionResult) => (result.output as { run_id: string }).run_id;

    // The happy lifecycle: start, events with an approval answered from the stream, status, evidence.
    const key = nextId('key');
    const body = { input: 'please run rm -rf ./scratch' };
    const started = await start('main', body, key);
    expect(started.status, JSON.stringify(started.error)).toBe('completed');
    const runId = runIdOf(started);
    const streamed = await events('main', runId, {
      onChunk: async (chunk) => {
        if (chunk.kind === 'pending_approval') codes.approval = codeOf(await approve('main', runId));
      },
    });
    codes.events = codeOf(streamed);
    codes.status = codeOf(await status('main', runId));
    codes.replay = (await start('main', body, key)).receipt?.replayed;
    codes.conflict = codeOf(await start('main', { input: 'something else' }, key));
    evidence.add('evidence by action', await connector.evidence(started.action_id));
    evidence.add('evidence by run', await connector.evidence(runId));
    evidence.add('reconcile', await connector.reconcile());

    // Stop and cancel of a live run.
    const live = runIdOf(await start('main', { input: 'hi', sim_script: [{ type: 'sleep', ms: 30_000 }] }));
    codes.stop = codeOf(await stop('main', live));
    const live2 = runIdOf(await start('main', { input: 'hi', sim_script: [{ type: 'sleep', ms: 30_000 }] }));
    codes.cancel = codeOf(await cancel({ capability_id: cap('main', 'run_events'), input: { run_id: live2 } }));

    // A stream cut mid-run (the approval holds the script until the reader is attached).
    const cutRun = runIdOf(
      await start('main', { input: 'hi', sim_script: [{ type: 'approval', command: 'ls' }, { type: 'cut' }, { type: 'sleep', ms: 30_000 }] }),
    );
    codes.cut = codeOf(
      await events('main', cutRun, {
        onChunk: async (chunk) => {
          if (chunk.kind === 'pending_approval') await approve('main', cutRun);
        },
      }),
    );

    // Provider failures.
    codes.unauthorized = codeOf(await status('stale', runId));
    codes.not_found = codeOf(await status('main', `run_${'0'.repeat(32)}`));
    codes.conflict_409 = codeOf(await approve('main', runId));
    sim.injectFault({
      route: 'start',
      response: {
        status: 429,
        headers: { 'Retry-After': '1' },
        body: JSON.stringify({ error: { message: 'Too many', type: 'rate_limit_error', param: null, code: 'rate_limit_exceeded' } }),
      },
    });
    codes.rate_limited = codeOf(await start('main', { input: 'hi' }));
    sim.injectFault({
      route: 'status',
      response: { status: 503, body: JSON.stringify({ error: { message: 'down', type: 'server_error', param: null, code: 'unavailable' } }) },
    });
    codes.remote_temporary = codeOf(await status('main', runId));
    sim.injectFault({ route: 'start', destroy: true });
    codes.transport_start = codeOf(await start('main', { input: 'hi' }));
    codes.transport_refused = codeOf(await status('refused', runId));
    sim.injectFault({ route: 'status', response: { status: 200, headers: { 'Content-Type': 'text/html' }, body: '<html></html>' } });
    codes.invalid_response = codeOf(await status('main', runId));
    sim.injectFault({ route: 'status', response: { status: 200, body: JSON.stringify({ run_id: runId, status: 'running', output: 'x'.repeat(8192) }) } });
    codes.too_large = codeOf(await status('main', runId));

    // Gates.
    codes.approval_refused = codeOf(await approve('main', live, false));
    codes.tenant_mismatch = codeOf(await status('main', runId, { tenantId: 'another-tenant' }));
    codes.deadline = codeOf(await status('main', runId, { deadline: Date.now() - 1 }));
    codes.cancelled = codeOf(await status('main', runId, { signal: AbortSignal.abort() }));
    codes.invalid_input = codeOf(await status('main', '..'));

    // A hostile provider that reflects the key.
    codes.reflected_401 = codeOf(await events('hostile', runId));
    codes.reflected_429 = codeOf(await status('hostile', runId));
    codes.reflected_500 = codeOf(await start('hostile', { input: 'hi' }));
    codes.reflected_redirect = codeOf(await status('hostile', 'redirect'));
    s.hostile.handle(resetBeforeHeaders);
    codes.reset = codeOf(await stop('hostile', runId));
    s.hostile.handle(byRoute({ events: sseCutAfterOneEvent, status: respondStatus('running') }));
    codes.hostile_cut = codeOf(await events('hostile', runId));

    // Every path above was really taken.
    expect(codes).toEqual({
      approval: 'completed',
      events: 'completed',
      status: 'completed',
      replay: true,
      conflict: 'idempotency_conflict',
      stop: 'completed',
      cancel: 'completed',
      cut: 'stream_incomplete',
      unauthorized: 'authentication',
      not_found: 'not_found',
      conflict_409: 'conflict',
      rate_limited: 'rate_limited',
      remote_temporary: 'remote_temporary',
      transport_start: 'transport',
      transport_refused: 'transport',
      invalid_response: 'invalid_response',
      too_large: 'invalid_response',
      approval_refused: 'approval_required',
      tenant_mismatch: 'tenant_mismatch',
      deadline: 'deadline_exceeded',
      cancelled: 'cancelled',
      invalid_input: 'invalid_input',
      reflected_401: 'authentication',
      reflected_429: 'rate_limited',
      reflected_500: 'remote_temporary',
      reflected_redirect: 'remote_rejected',
      reset: 'transport',
      hostile_cut: 'stream_incomplete',
    });

    // The canary really was the credential on the wire.
    expect(sim.requests.every((request) => request.headers.authorization === `Bearer ${CANARY_KEY}`)).toBe(true);
    expect(s.hostile.requests.length).toBeGreaterThan(0);

    evidence.add('manifest', connector.manifest());
    evidence.add('capabilities', connector.capabilities());
    for (const capability of connector.capabilities()) {
      evidence.add(`capability ${capability.id}`, connector.capability(capability.id));
      evidence.add(`support ${capability.id}`, connector.implementationSupport(capability.id));
    }
    evidence.add('connector', connector);
    // Trace logging was on and wrote lines for every action.
    expect(s.lines.length).toBeGreaterThan(40);
    expect(s.lines.some((line) => (JSON.parse(line) as { level: number }).level === 10)).toBe(true);

    expect(evidence.leaks(CANARY_KEY)).toEqual([]);
    expect(s.lines.filter((line) => line.includes(CANARY_KEY))).toEqual([]);
    // The key's base64 form (as in a Basic header) does not appear either.
    expect(evidence.leaks(Buffer.from(CANARY_KEY).toString('base64'))).toEqual([]);
  }, 60_000);

  it('close() during a stream, and calls after it, leak nothing', async () => {
    const s = await setup();
    const started = await s.invoke({
      capability_id: s.cap('main', 'run_start'),
      input: {
        body: {
          input: 'hi',
          sim_script: [
            { type: 'delta', text: 'hi' },
            { type: 'sleep', ms: 30_000 },
          ],
        },
      },
      idempotency_key: nextId('key'),
    });
    expect(started.status, JSON.stringify(started.error)).toBe('completed');
    let streaming: () => void = () => undefined;
    const firstChunk = new Promise<void>((resolve) => (streaming = resolve));
    const pending = s.invoke(
      { capability_id: s.cap('main', 'run_events'), input: { run_id: (started.output as { run_id: string }).run_id } },
      { onChunk: () => streaming() },
    );
    await firstChunk;
    await s.connector.close();
    expect(codeOf(await pending)).toBe('cancelled');
    expect(codeOf(await s.invoke({ capability_id: s.cap('main', 'run_status'), input: { run_id: 'run_x' } }))).toBe('cancelled');
    s.evidence.add('connector after close', s.connector);
    expect(s.evidence.leaks(CANARY_KEY)).toEqual([]);
    expect(s.lines.filter((line) => line.includes(CANARY_KEY))).toEqual([]);
  });
});

/** A chunk's text part, '' when it has none. */
const textOf = (chunk: AipStreamChunk) => (chunk.part?.type === 'text' ? chunk.part.text : '');

describe('secret canary: a provider that reflects the key into successful answers', () => {
  /** The key in a value, in a member name and behind JSON escapes, which only a parse reveals. */
  const reflecting = (fields: Record<string, unknown>) =>
    JSON.stringify({ ...fields, echo: `Bearer ${CANARY_KEY}`, [CANARY_KEY]: 1, nested: [{ deep: CANARY_KEY }] }).replace(
      /}$/,
      `, "escaped": "\\u0073${CANARY_KEY.slice(1)}"}`,
    );
  const half = CANARY_KEY.length >> 1;
  const frames = [
    { event: 'message.delta', delta: `key ${CANARY_KEY}` },
    // Split across two deltas: only the joined text holds it.
    { event: 'message.delta', delta: ` and ${CANARY_KEY.slice(0, half)}` },
    { event: 'message.delta', delta: CANARY_KEY.slice(half) },
    { event: 'tool.completed', output: CANARY_KEY, [CANARY_KEY]: true },
  ];
  const sse =
    frames.map((frame) => `data: ${JSON.stringify({ run_id: 'run_x', timestamp: 1, ...frame })}\n\n`).join('') +
    `id: ${CANARY_KEY}\nevent: reasoning.${CANARY_KEY}\ndata: {"text": "\\u0073${CANARY_KEY.slice(1)}"}\n\n` +
    `data: {"event": "run.completed", "output": "${CANARY_KEY}"}\n\n`;
  const handler: FaultHandler = (exchange) => {
    const path = exchange.request.target;
    if (path.endsWith('/events')) return exchange.respond(200, sse, { 'Content-Type': SSE_TYPE });
    const fields = exchange.request.method === 'GET' ? { run_id: 'run_x', status: 'running' } : { run_id: 'run_x', status: 'started', choice: 'once' };
    return exchange.respond(exchange.request.method === 'GET' ? 200 : 202, reflecting(fields), { 'Content-Type': JSON_TYPE });
  };

  it('is redacted from every output, message, chunk and part, success included', async () => {
    const server = await startFaultServer(handler);
    closers.push(() => server.close());
    const connector = createHermesConnector({ endpoints: [{ id: 'reflect', baseUrl: server.url, apiKey: CANARY_KEY }] });
    closers.push(() => connector.close());
    const evidence = new Evidence();
    const cap = (operation: string) => `cap:hermes_agent:reflect:${operation}`;
    const runInput = { run_id: 'run_x' };
    const actions: Array<[AipAction, ExecutionContext]> = [
      [{ id: nextId('reflect'), capability_id: cap('run_start'), input: { body: { input: 'hi' } }, idempotency_key: nextId('key') }, {}],
      [{ id: nextId('reflect'), capability_id: cap('run_status'), input: runInput }, {}],
      [
        { id: nextId('reflect'), capability_id: cap('run_approval'), input: { run_id: 'run_x', choice: 'once' }, idempotency_key: nextId('key') },
        { approval: grantFor({ run_id: 'run_x', choice: 'once' }) },
      ],
      [{ id: nextId('reflect'), capability_id: cap('run_stop'), input: runInput, idempotency_key: nextId('key') }, { approval: grantFor(runInput) }],
      [{ id: nextId('reflect'), capability_id: cap('run_events'), input: runInput }, {}],
    ];
    const statuses: string[] = [];
    for (const [action, context] of actions) {
      const result = await connector.invoke(action, { ...context, onChunk: (chunk) => evidence.add(`chunk of ${action.capability_id}`, chunk) });
      statuses.push(result.status);
      evidence.add(`result of ${action.capability_id}`, result);
    }
    expect(statuses).toEqual(['completed', 'completed', 'completed', 'completed', 'completed']);
    expect(evidence.leaks(CANARY_KEY)).toEqual([]);
    // The answers were used, with the key replaced rather than the values dropped.
    const events = evidence.items.find(({ what }) => what === `result of ${cap('run_events')}`)?.value as AipActionResult;
    expect(events.message).toEqual([{ type: 'text', text: 'key [REDACTED] and [REDACTED]' }]);
    // The key split across two deltas is in no delta and no chunk either: joined, they read as the message.
    const deltas = (events.output as RunEventsOutput).events.filter((event) => event.event === 'message.delta').map((event) => event.data.delta);
    expect(deltas).toEqual([`key [REDACTED]`, ' and [REDACTED]', '']);
    const chunkTexts = evidence.items.filter(({ what }) => what === `chunk of ${cap('run_events')}`).map(({ value }) => textOf(value as AipStreamChunk));
    expect(chunkTexts.join('')).not.toContain(CANARY_KEY);
    expect(chunkTexts.slice(0, 3)).toEqual(['key [REDACTED]', ' and [REDACTED]', '']);
    expect((events.output as { events: Array<{ event: string; id?: string }> }).events.slice(-2)).toEqual([
      { event: 'reasoning.[REDACTED]', id: '[REDACTED]', data: { text: '[REDACTED]' } },
      { event: 'run.completed', data: { event: 'run.completed', output: '[REDACTED]' } },
    ]);
    const status = evidence.items.find(({ what }) => what === `result of ${cap('run_status')}`)?.value as AipActionResult;
    expect(status.output).toEqual({
      run_id: 'run_x',
      status: 'running',
      echo: 'Bearer [REDACTED]',
      '[REDACTED]': 1,
      nested: [{ deep: '[REDACTED]' }],
      escaped: '[REDACTED]',
    });
  });
});

describe('secret canary: configuration errors', () => {
  const invalid: Array<[string, Record<string, unknown>]> = [
    ['a key with a space in it', { id: 'ep', baseUrl: 'http://127.0.0.1:1', apiKey: `${CANARY_KEY} trailing` }],
    ['a key with a newline in it', { id: 'ep', baseUrl: 'http://127.0.0.1:1', apiKey: `${CANARY_KEY}\n` }],
    ['the key as URL user info', { id: 'ep', baseUrl: `http://user:${CANARY_KEY}@127.0.0.1:1`, apiKey: CANARY_KEY }],
    ['the key in the base URL query', { id: 'ep', baseUrl: `http://127.0.0.1:1/?key=${CANARY_KEY}`, apiKey: CANARY_KEY }],
    ['the key in the base URL path', { id: 'ep', baseUrl: `http://127.0.0.1:1/${CANARY_KEY}`, apiKey: CANARY_KEY }],
    ['the key as an invalid endpoint id', { id: CANARY_KEY.toUpperCase(), baseUrl: 'http://127.0.0.1:1', apiKey: CANARY_KEY }],
    ['the key in an over-long tenant', { id: 'ep', baseUrl: 'http://127.0.0.1:1', apiKey: CANARY_KEY, tenantId: ` ${CANARY_KEY}` }],
  ];

  it.each(invalid)('%s: ConnectorConfigError whose message, stack and inspection hold no key', (_name, endpoint) => {
    let thrown: unknown;
    try {
      createHermesConnector({ endpoints: [endpoint as never] });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConnectorConfigError);
    const evidence = new Evidence();
    evidence.add('error', thrown);
    evidence.add('message', (thrown as Error).message);
    evidence.add('stack', (thrown as Error).stack);
    expect(evidence.leaks(CANARY_KEY)).toEqual([]);
    expect(evidence.leaks(CANARY_KEY.toUpperCase())).toEqual([]);
  });
});

/** One event, then the connection is reset (a cut stream on a hostile endpoint). */
const sseCutAfterOneEvent: FaultHandler = async (exchange) => {
  await exchange.head(200, { 'Content-Type': SSE_TYPE, 'Transfer-Encoding': 'chunked' });
  await exchange.chunk(`data: ${JSON.stringify({ event: 'message.delta', run_id: 'run_x', timestamp: 1, delta: 'partial' })}\n\n`);
  await exchange.sleep(20);
  exchange.reset();
};

describe('secret canary: the start of the key at the end of a stream', () => {
  /** A stream whose last delta ends with the first characters of the key, then a clean close or a reset. */
  const cutAfterKeyStart =
    (ending: 'close' | 'reset'): FaultHandler =>
    async (exchange) => {
      if (!exchange.request.target.endsWith('/events')) return exchange.respond(200, '{"run_id": "run_x", "status": "running"}', { 'Content-Type': JSON_TYPE });
      await exchange.head(200, { 'Content-Type': SSE_TYPE, 'Transfer-Encoding': 'chunked' });
      await exchange.chunk(`data: ${JSON.stringify({ event: 'message.delta', run_id: 'run_x', delta: 'first' })}\n\n`);
      await exchange.chunk(`data: ${JSON.stringify({ event: 'message.delta', run_id: 'run_x', delta: ` then ${CANARY_KEY.slice(0, 6)}` })}\n\n`);
      if (ending === 'close') await exchange.endChunked();
      else {
        await exchange.sleep(50);
        exchange.reset();
      }
    };

  it.each(['close', 'reset'] as const)('a %s: the held delta is in the events, the chunks and the text, as sent', async (ending) => {
    const server = await startFaultServer(cutAfterKeyStart(ending));
    closers.push(() => server.close());
    const connector = createHermesConnector({ endpoints: [{ id: 'cut', baseUrl: server.url, apiKey: CANARY_KEY }] });
    closers.push(() => connector.close());
    const parts: string[] = [];
    const result = await connector.invoke(
      { id: nextId('cut'), capability_id: 'cap:hermes_agent:cut:run_events', input: { run_id: 'run_x' } },
      { onChunk: (chunk) => void parts.push(textOf(chunk) || `(${chunk.kind})`) },
    );
    expect(result.error?.code).toBe(`${PREFIX}stream_incomplete`);
    const output = result.output as RunEventsOutput;
    const sent = ['first', ` then ${CANARY_KEY.slice(0, 6)}`];
    expect(output.events.map((event) => event.data.delta)).toEqual(sent);
    expect(output.text).toBe(sent.join(''));
    expect(parts.slice(0, 2)).toEqual(sent);
    expect(result.error?.message).toContain(ending === 'close' ? 'closed without a terminal event' : 'broke');
  });
});

describe('secret canary: deltas that end with the first letter of the key', () => {
  /** A key starting with `h`, and a model whose every delta ends with an `h`. */
  const H_KEY = `hk_live_${randomBytes(12).toString('hex')}`;
  const frame = `data: ${JSON.stringify({ event: 'message.delta', run_id: 'run_h', delta: 'search' })}\n\n`;
  const FRAMES_PER_WRITE = 500;
  /** 64 MiB of such deltas, written as fast as the client reads them: far more than the kernel's socket buffers hold. */
  const WRITES = Math.ceil((64 * 2 ** 20) / (frame.length * FRAMES_PER_WRITE));

  it('max_events stops reading after the 10th delta and each delta reaches onChunk while the stream is open, not at its end', async () => {
    let stream: FaultExchange | undefined;
    let written = 0;
    const server = await startFaultServer(async (exchange) => {
      if (!exchange.request.target.endsWith('/events')) return respondStatus('running')(exchange);
      stream = exchange;
      await exchange.head(200, { 'Content-Type': SSE_TYPE, 'Transfer-Encoding': 'chunked' });
      const batch = frame.repeat(FRAMES_PER_WRITE);
      for (let write = 0; write < WRITES && (await exchange.chunk(batch)); write++) written += batch.length;
      // The stream never ends from this side: only the client closes it.
      while (await exchange.sleep(1000));
    });
    closers.push(() => server.close());
    const connector = createHermesConnector({ endpoints: [{ id: 'hkey', baseUrl: server.url, apiKey: H_KEY }] });
    closers.push(() => connector.close());
    const seen: Array<{ kind: string; text: string; streamOpen: boolean }> = [];
    const result = await connector.invoke(
      { id: nextId('hkey'), capability_id: 'cap:hermes_agent:hkey:run_events', input: { run_id: 'run_h', max_events: 10 } },
      {
        // A guard against a reader that waits for the end of a stream that never ends: the call would fail with `deadline_exceeded`.
        deadline: Date.now() + 10_000,
        onChunk: (chunk) => void seen.push({ kind: chunk.kind, text: textOf(chunk), streamOpen: stream?.closed() === false }),
      },
    );
    expect(result.error?.code).toBe(`${PREFIX}stream_truncated`);
    expect((result.output as RunEventsOutput).events.map((event) => event.data.delta)).toEqual(Array(10).fill('search'));
    expect(seen.slice(0, 10)).toEqual(Array(10).fill({ kind: 'data', text: 'search', streamOpen: true }));
    expect(seen.slice(10).map(({ kind }) => kind)).toEqual(['error']);
    // The client closed the stream: the server could not write half of it, whatever the kernel buffered.
    expect(await server.requestConnectionClosed(0, 3000)).toEqual({ byClient: true });
    expect(written).toBeLessThan((WRITES * frame.length * FRAMES_PER_WRITE) / 2);
  });
});
