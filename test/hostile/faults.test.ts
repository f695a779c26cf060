/**
 * Every fault of issue 7, part 2, served by the raw-socket fault server (test/helpers/fault-server.ts)
 * to the built connector. Each test asserts the exact result (code, retryable, uncertain_outcome),
 * that the call resolved (it is bounded by a short context deadline where the fault would
 * otherwise hang), that a mutation reached the server exactly once (no retry), and, where the
 * connector had to walk away, that it closed the connection. Redirect tests also prove that no
 * request reached the other origin and that Authorization went nowhere but the original one.
 *
 * What each fault must give follows the API doc (design/connector-api.md, "Outcomes"): transport
 * trouble is `transport` (retryable for reads, uncertain for mutations); a stream that breaks
 * after its headers is `stream_incomplete` with a reconciliation read; bodies over their limit,
 * undecodable bytes and wrong content types are `invalid_response`; a passing deadline is
 * `deadline_exceeded`; a 3xx is `remote_rejected` and never followed.
 */
import { Agent } from 'undici';
import { describe, expect, it } from 'vitest';
import { createMemoryLedger, type AipStreamChunk, type RunLedger } from 'aip-connector-hermes-agent';
import {
  JSON_TYPE,
  SSE_TYPE,
  byRoute,
  declaredOversizedJson,
  endlessChunkedJson,
  endlessSseLine,
  keepalives,
  neverRespond,
  oversizedJsonWithLength,
  redirectTo,
  resetAfterHeaders,
  resetBeforeHeaders,
  resetMidBody,
  respondJson,
  respondStatus,
  slowHeaders,
  sseChunks,
  type FaultHandler,
} from '../helpers/fault-server.js';
import { HOSTILE_KEY, MUTATIONS, OPERATIONS, expectError, expectOneFinalChunk, invokeValid, rigFactory, type Operation } from './support.js';

const { rig, server: extraServer } = rigFactory();

const isRead = (operation: Operation) => operation === 'run_status' || operation === 'run_events';
const RUN = `run_${'a'.repeat(32)}`;
/** A short AIP deadline that bounds calls the fault would otherwise hang. */
const soon = (ms = 400) => Date.now() + ms;

/** What a 2xx JSON answer of each operation looks like. */
const OK_BODY: Record<Operation, { status: number; body: Record<string, unknown> }> = {
  run_start: { status: 202, body: { run_id: RUN, status: 'started' } },
  run_status: { status: 200, body: { object: 'hermes.run', run_id: RUN, status: 'running' } },
  run_events: { status: 200, body: {} },
  run_approval: { status: 200, body: { object: 'hermes.run.approval_response', run_id: RUN, choice: 'once', resolved: 1 } },
  run_stop: { status: 200, body: { run_id: RUN, status: 'stopping' } },
};
const JSON_OPERATIONS = OPERATIONS.filter((operation) => operation !== 'run_events');

const frame = (event: Record<string, unknown>) => `data: ${JSON.stringify({ run_id: RUN, timestamp: 1751790000.5, ...event })}\n\n`;

interface EventsOutput {
  http_status: number;
  events: Array<{ event: string }>;
  terminal: boolean;
  reconciliation?: { http_status: number | null; status?: { status: string }; error_code?: string };
}

async function readEvents(handler: FaultHandler, options: { deadline?: number; limits?: Record<string, number> } = {}) {
  const { connector, server } = await rig(byRoute({ events: handler, status: respondStatus('running') }), options.limits ? { limits: options.limits } : {});
  const chunks: AipStreamChunk[] = [];
  const result = await invokeValid(connector, 'run_events', { chunks, context: options.deadline === undefined ? {} : { deadline: options.deadline } });
  return { result, chunks, server, output: result.output as EventsOutput | undefined };
}

/**
 * The requests to the runs API: a mutation whose answer was lost may also read what the endpoint
 * declares (GET /v1/capabilities) to learn whether it may be asked again; this server declares nothing.
 */
const runRequests = (server: { requests: Array<{ target: string }> }) => server.requests.filter((request) => request.target.startsWith('/v1/runs'));

describe('connection reset before the status line', () => {
  it.each(OPERATIONS)('%s: transport (retryable only for reads, uncertain only for mutations), one request', async (operation) => {
    const { connector, server } = await rig(resetBeforeHeaders);
    const result = await invokeValid(connector, operation);
    expectError(result, { code: 'transport', category: 'transport', retryable: isRead(operation), uncertain: !isRead(operation), remote_status: undefined });
    expect(runRequests(server)).toHaveLength(1);
  });
});

describe('connection reset after the headers', () => {
  it.each(JSON_OPERATIONS)('%s: 2xx headers, then a reset before the body → transport, one request', async (operation) => {
    const { status } = OK_BODY[operation];
    const { connector, server } = await rig(resetAfterHeaders(status, { 'Content-Type': JSON_TYPE, 'Content-Length': 200 }));
    const result = await invokeValid(connector, operation);
    expectError(result, { code: 'transport', category: 'transport', retryable: isRead(operation), uncertain: !isRead(operation), remote_status: status });
    expect(result.receipt?.http_status).toBe(status);
    expect(runRequests(server)).toHaveLength(1);
  });

  it('run_events: 200 event-stream headers, then a reset → stream_incomplete, reconciled by one status read', async () => {
    const { result, chunks, server, output } = await readEvents(resetAfterHeaders(200, { 'Content-Type': SSE_TYPE, 'Transfer-Encoding': 'chunked' }));
    expectError(result, { code: 'stream_incomplete', category: 'connector', retryable: false, uncertain: false });
    expect(output?.events).toEqual([]);
    expect(output?.terminal).toBe(false);
    expect(output?.reconciliation).toEqual({ http_status: 200, status: { object: 'hermes.run', run_id: RUN, status: 'running' } });
    expect(server.requests.map((request) => `${request.method} ${request.target}`)).toEqual([`GET /v1/runs/${RUN}/events`, `GET /v1/runs/${RUN}`]);
    expectOneFinalChunk(chunks, 'error');
  });
});

describe('connection reset in the middle of the body', () => {
  it.each(JSON_OPERATIONS)('%s: half a JSON body, then a reset → transport, one request', async (operation) => {
    const { status, body } = OK_BODY[operation];
    const text = JSON.stringify(body);
    const { connector, server } = await rig(
      resetMidBody(status, { 'Content-Type': JSON_TYPE, 'Content-Length': text.length }, text.slice(0, text.length >> 1)),
    );
    const result = await invokeValid(connector, operation);
    expectError(result, { code: 'transport', category: 'transport', retryable: isRead(operation), uncertain: !isRead(operation), remote_status: status });
    expect(runRequests(server)).toHaveLength(1);
  });

  it('run_events: two events and half of a third, then a reset → stream_incomplete with the two events', async () => {
    const partial = `${frame({ event: 'message.delta', delta: 'Hel' })}${frame({ event: 'message.delta', delta: 'lo' })}data: {"event": "message.del`;
    const { result, chunks, server, output } = await readEvents(resetMidBody(200, { 'Content-Type': SSE_TYPE, 'Transfer-Encoding': 'chunked' }, partial, true));
    expectError(result, { code: 'stream_incomplete', category: 'connector', retryable: false, uncertain: false });
    expect(output?.events.map((event) => event.event)).toEqual(['message.delta', 'message.delta']);
    expect(result.message).toEqual([{ type: 'text', text: 'Hello' }]);
    expect(output?.reconciliation?.http_status).toBe(200);
    expect(server.requests).toHaveLength(2);
    expect(chunks.map((chunk) => chunk.kind)).toEqual(['data', 'data', 'error']);
    expectOneFinalChunk(chunks, 'error');
  });
});

describe('a JSON body in several reads', () => {
  it.each(JSON_OPERATIONS)('%s: the body in three chunks with pauses between → completed with the whole body', async (operation) => {
    const { status, body } = OK_BODY[operation];
    const text = JSON.stringify(body);
    const third = Math.ceil(text.length / 3);
    const { connector } = await rig(async (exchange) => {
      await exchange.head(status, { 'Content-Type': JSON_TYPE, 'Transfer-Encoding': 'chunked' });
      for (let at = 0; at < text.length; at += third) {
        await exchange.chunk(text.slice(at, at + third));
        await exchange.sleep(5);
      }
      await exchange.endChunked();
    });
    const result = await invokeValid(connector, operation);
    expect(result.status).toBe('completed');
    expect(result.output).toMatchObject(body);
    expect(result.receipt?.http_status).toBe(status);
  });
});

describe('headers sent slowly', () => {
  it('one byte every few milliseconds, all within the deadline: the answer is used (control)', async () => {
    const { connector, server } = await rig(slowHeaders(3, 200, JSON.stringify(OK_BODY.run_status.body)));
    const result = await invokeValid(connector, 'run_status', { context: { deadline: soon(15_000) } });
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    expect(result.output).toEqual(OK_BODY.run_status.body);
    expect(server.requests).toHaveLength(1);
  });

  it.each(OPERATIONS)('%s: slower than the deadline → deadline_exceeded, one request, the connection closed by the connector', async (operation) => {
    const { connector, server } = await rig(slowHeaders(40, OK_BODY[operation].status, JSON.stringify(OK_BODY[operation].body)));
    const result = await invokeValid(connector, operation, { context: { deadline: soon() } });
    expectError(result, { code: 'deadline_exceeded', category: 'temporary', retryable: false, uncertain: !isRead(operation) });
    expect(server.requests).toHaveLength(1);
    expect(await server.requestConnectionClosed(0)).toEqual({ byClient: true });
  });
});

describe('headers never sent', () => {
  it.each(OPERATIONS)('%s: the deadline passes → deadline_exceeded, one request, the connection closed by the connector', async (operation) => {
    const { connector, server } = await rig(neverRespond);
    const result = await invokeValid(connector, operation, { context: { deadline: soon() } });
    expectError(result, { code: 'deadline_exceeded', category: 'temporary', retryable: false, uncertain: !isRead(operation) });
    expect(result.output).toBeUndefined();
    expect(server.requests).toHaveLength(1);
    expect(await server.requestConnectionClosed(0)).toEqual({ byClient: true });
  });

  it.each(MUTATIONS)('%s: the caller aborts while waiting → cancelled, outcome uncertain, one request', async (operation) => {
    const { connector, server } = await rig(neverRespond);
    const controller = new AbortController();
    const pending = invokeValid(connector, operation, { context: { signal: controller.signal, deadline: soon(15_000) } });
    await waitFor(() => server.requests.length === 1);
    controller.abort(new Error('host gave up'));
    const result = await pending;
    expectError(result, { code: 'cancelled', status: 'cancelled', category: 'temporary', retryable: false, uncertain: true });
    expect(server.requests).toHaveLength(1);
    expect(await server.requestConnectionClosed(0)).toEqual({ byClient: true });
  });
});

describe('a request still waiting for a connection', () => {
  it.each([...MUTATIONS, 'run_events' as const])(
    '%s queued behind a stuck request on a one-connection dispatcher: its deadline ends it at once, certainly unsent, and it is never sent later',
    async (operation) => {
      const agent = new Agent({ connections: 1 });
      try {
        const { connector, server } = await rig(neverRespond, { dispatcher: agent });
        let stuckSettled = false;
        const stuck = invokeValid(connector, 'run_status', { context: { deadline: soon(1500) } }).finally(() => (stuckSettled = true));
        await waitFor(() => server.requests.length === 1);
        const queued = await invokeValid(connector, operation, { context: { deadline: soon(200) } });
        // Ended by its own deadline while the first call still held the only connection.
        expect(stuckSettled).toBe(false);
        expectError(queued, { code: 'deadline_exceeded', category: 'temporary', retryable: false, uncertain: false });
        await stuck;
        // The connection is free again: the aborted request must not go out now.
        await new Promise((resolve) => setTimeout(resolve, 100));
        expect(server.requests).toHaveLength(1);
      } finally {
        await agent.destroy();
      }
    },
  );
});

describe('an SSE line that never ends', () => {
  it('grows without end: invalid_response once past the frame limit, and the connector closes the stream', async () => {
    // 1 KiB every 5 ms: without the frame limit only the 5 s deadline would end the call.
    const { result, chunks, server, output } = await readEvents(endlessSseLine(1024, 5), { deadline: soon(5_000), limits: { maxSseFrameBytes: 4096 } });
    expectError(result, { code: 'invalid_response', category: 'connector', retryable: false, uncertain: false, remote_status: 200 });
    expect(output?.events).toEqual([]);
    expect(server.requests).toHaveLength(1);
    expectOneFinalChunk(chunks, 'error');
    expect(await server.requestConnectionClosed(0)).toEqual({ byClient: true });
  });

  it('trickles below the frame limit: deadline_exceeded with the partial output, and the stream closed', async () => {
    const { result, chunks, server, output } = await readEvents(endlessSseLine(8, 20), { deadline: soon(), limits: { maxSseFrameBytes: 1024 * 1024 } });
    expectError(result, { code: 'deadline_exceeded', category: 'temporary', retryable: false, uncertain: false });
    expect(output?.http_status).toBe(200);
    expect(output?.events).toEqual([]);
    expect(server.requests).toHaveLength(1);
    expectOneFinalChunk(chunks, 'error');
    expect(await server.requestConnectionClosed(0)).toEqual({ byClient: true });
  });
});

describe('a JSON body larger than the limit', () => {
  const LIMIT = 64 * 1024;

  it.each(JSON_OPERATIONS)(
    '%s: declared by Content-Length and never sent → invalid_response at once (the header is trusted), one request',
    async (operation) => {
      const { connector, server } = await rig(declaredOversizedJson(10 * LIMIT, OK_BODY[operation].status), { limits: { maxJsonResponseBytes: LIMIT } });
      const result = await invokeValid(connector, operation, { context: { deadline: soon(5_000) } });
      expectError(result, {
        code: 'invalid_response',
        category: 'connector',
        retryable: false,
        uncertain: !isRead(operation),
        remote_status: OK_BODY[operation].status,
      });
      expect(result.output).toBeUndefined();
      expect(server.requests).toHaveLength(1);
      expect(await server.requestConnectionClosed(0)).toEqual({ byClient: true });
    },
  );

  it.each(JSON_OPERATIONS)('%s: sent in full with Content-Length → invalid_response, one request', async (operation) => {
    const { connector, server } = await rig(oversizedJsonWithLength(2 * LIMIT, OK_BODY[operation].status), { limits: { maxJsonResponseBytes: LIMIT } });
    const result = await invokeValid(connector, operation);
    expectError(result, {
      code: 'invalid_response',
      category: 'connector',
      retryable: false,
      uncertain: !isRead(operation),
      remote_status: OK_BODY[operation].status,
    });
    expect(server.requests).toHaveLength(1);
  });

  it.each(JSON_OPERATIONS)(
    '%s: chunked without Content-Length and never ending → invalid_response once past the limit, the connection closed',
    async (operation) => {
      // 4 KiB every 5 ms: without counting, only the 5 s deadline would end the call.
      const { connector, server } = await rig(endlessChunkedJson(4096, 5, OK_BODY[operation].status), { limits: { maxJsonResponseBytes: LIMIT } });
      const result = await invokeValid(connector, operation, { context: { deadline: soon(5_000) } });
      expectError(result, {
        code: 'invalid_response',
        category: 'connector',
        retryable: false,
        uncertain: !isRead(operation),
        remote_status: OK_BODY[operation].status,
      });
      expect(server.requests).toHaveLength(1);
      expect(await server.requestConnectionClosed(0)).toEqual({ byClient: true });
    },
  );
});

describe('invalid UTF-8', () => {
  /** A body that is valid JSON of the right shape once decoded leniently: only strict UTF-8 refuses it. */
  const withBadByte = (operation: Operation) => {
    const text = JSON.stringify({ ...OK_BODY[operation].body, note: 'caf\u00e9' });
    const bytes = Buffer.from(text, 'utf8');
    const at = bytes.indexOf(0xc3);
    bytes[at] = 0xff;
    return bytes;
  };

  it.each(JSON_OPERATIONS)('%s: a 2xx JSON body with an invalid byte → invalid_response, one request', async (operation) => {
    const { connector, server } = await rig((exchange) => exchange.respond(OK_BODY[operation].status, withBadByte(operation), { 'Content-Type': JSON_TYPE }));
    const result = await invokeValid(connector, operation);
    expectError(result, {
      code: 'invalid_response',
      category: 'connector',
      retryable: false,
      uncertain: !isRead(operation),
      remote_status: OK_BODY[operation].status,
    });
    expect(result.output).toBeUndefined();
    expect(server.requests).toHaveLength(1);
  });

  it('run_events: a lead byte in one write and a bad continuation in the next → invalid_response after the good event', async () => {
    const good = frame({ event: 'message.delta', delta: 'ok' });
    const { result, chunks, output } = await readEvents(
      sseChunks([Buffer.from(`${good}data: {"event": "message.delta", "delta": "`), Buffer.of(0xc3), Buffer.from('("}\n\n')]),
    );
    expectError(result, { code: 'invalid_response', category: 'connector', retryable: false, uncertain: false, remote_status: 200 });
    expect(output?.events.map((event) => event.event)).toEqual(['message.delta']);
    expect(chunks.map((chunk) => chunk.kind)).toEqual(['data', 'error']);
  });
});

describe('provider JSON nested deeper than 256 levels', () => {
  /** The operation's 2xx body with an `output` member that brings the whole value to `depth` levels. */
  const nestedBody = (operation: Operation, depth: number) =>
    JSON.stringify({ ...OK_BODY[operation].body, output: '@' }).replace('"@"', `${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}`);

  it.each(JSON_OPERATIONS)('%s: 256 levels are used; 257 → invalid_response (uncertain for mutations)', async (operation) => {
    const { status } = OK_BODY[operation];
    const { connector } = await rig((exchange) =>
      exchange.respond(status, nestedBody(operation, exchange.request.headers['x-aip-trace-id'] === 'deep' ? 257 : 256), { 'Content-Type': JSON_TYPE }),
    );
    expect((await invokeValid(connector, operation)).status).toBe('completed');
    const deep = await invokeValid(connector, operation, { context: { traceId: 'deep' } });
    expectError(deep, { code: 'invalid_response', category: 'connector', retryable: false, uncertain: !isRead(operation), remote_status: status });
    expect(deep.output).toBeUndefined();
  });

  it('run_status: a 16 MiB body of brackets → invalid_response, and the result can be serialised', async () => {
    const half = 8 * 1024 * 1024 - 64;
    const { connector } = await rig((exchange) =>
      exchange.respond(200, `{"run_id": "r", "status": "running", "output": ${'['.repeat(half)}${']'.repeat(half)}}`, { 'Content-Type': JSON_TYPE }),
    );
    const result = await invokeValid(connector, 'run_status', { context: { deadline: soon(15_000) } });
    expectError(result, { code: 'invalid_response', retryable: false, uncertain: false, remote_status: 200 });
    expect(() => JSON.stringify(result)).not.toThrow();
  });

  it('run_events: a frame nested 257 levels deep → invalid_response after the events before it; 256 levels are used', async () => {
    const frameAt = (depth: number) => `data: {"event": "tool.completed", "output": ${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}\n\n`;
    const body = (depth: number) => `${frame({ event: 'message.delta', delta: 'a' })}${frameAt(depth)}${frame({ event: 'run.completed' })}`;
    const fine = await readEvents((exchange) => exchange.respond(200, body(256), { 'Content-Type': SSE_TYPE }));
    expect(fine.result.status).toBe('completed');
    const { result, chunks, output } = await readEvents((exchange) => exchange.respond(200, body(257), { 'Content-Type': SSE_TYPE }));
    expectError(result, { code: 'invalid_response', retryable: false, uncertain: false, remote_status: 200 });
    expect(output?.events.map((event) => event.event)).toEqual(['message.delta']);
    expect(chunks.map((chunk) => chunk.kind)).toEqual(['data', 'error']);
  });
});

describe('redirects to another origin are never followed', () => {
  const cases = OPERATIONS.flatMap((operation) => [301, 302, 303, 307, 308].map((status) => [operation, status] as const));

  it.each(cases)('%s answered %i → remote_rejected; the other origin never contacted; Authorization only on the original', async (operation, status) => {
    const other = await extraServer(respondJson(200, OK_BODY[operation].body));
    const { connector, server } = await rig(redirectTo(status, `${other.url}/v1/runs/${RUN}${operation === 'run_events' ? '/events' : ''}`));
    const result = await invokeValid(connector, operation);
    expectError(result, { code: 'remote_rejected', category: 'permanent', retryable: false, uncertain: false, remote_status: status });
    expect(server.requests).toHaveLength(1);
    expect(other.requests).toHaveLength(0);
    expect(other.connectionCount()).toBe(0);
    expect(server.requests.map((request) => request.headers.authorization)).toEqual([`Bearer ${HOSTILE_KEY}`]);
  });

  it('a redirect to the same origin is not followed either', async () => {
    const { connector, server } = await rig((exchange) =>
      exchange.request.target.startsWith('/elsewhere') ? respondJson(200, OK_BODY.run_status.body)(exchange) : redirectTo(307, '/elsewhere')(exchange),
    );
    const result = await invokeValid(connector, 'run_status');
    expectError(result, { code: 'remote_rejected', retryable: false, uncertain: false, remote_status: 307 });
    expect(server.requests.map((request) => request.target)).toEqual([`/v1/runs/${RUN}`]);
  });
});

describe('200 with a wrong content type', () => {
  it.each(JSON_OPERATIONS.flatMap((operation) => [['text/plain', operation] as const, ['', operation] as const]))(
    'content type %j on %s with a valid JSON body → invalid_response, one request',
    async (type, operation) => {
      const { status, body } = OK_BODY[operation];
      const { connector, server } = await rig((exchange) => exchange.respond(status, JSON.stringify(body), type === '' ? {} : { 'Content-Type': type }));
      const result = await invokeValid(connector, operation);
      expectError(result, { code: 'invalid_response', category: 'connector', retryable: false, uncertain: !isRead(operation), remote_status: status });
      expect(result.output).toBeUndefined();
      expect(server.requests).toHaveLength(1);
    },
  );

  it.each(['text/plain', 'application/json', 'text/html; charset=utf-8', 'text/event-streamx', 'text/event-stream-v2; charset=utf-8'])(
    'run_events answered %j with valid SSE bytes → invalid_response, no event used',
    async (type) => {
      const body = `${frame({ event: 'message.delta', delta: 'hi' })}${frame({ event: 'run.completed', output: 'hi' })}`;
      const { result, chunks, server } = await readEvents((exchange) => exchange.respond(200, body, { 'Content-Type': type }));
      expectError(result, { code: 'invalid_response', category: 'connector', retryable: false, uncertain: false, remote_status: 200 });
      expect(server.requests).toHaveLength(1);
      expect(chunks.map((chunk) => chunk.kind)).toEqual(['error']);
    },
  );
});

describe('event-stream content types that are the same media type', () => {
  it.each(['text/event-stream; charset=utf-8', 'TEXT/Event-Stream', 'text/event-stream ;charset=utf-8'])(
    'run_events answered %j reads the stream',
    async (type) => {
      const body = `${frame({ event: 'message.delta', delta: 'hi' })}${frame({ event: 'run.completed', output: 'hi' })}`;
      const { result, chunks } = await readEvents((exchange) => exchange.respond(200, body, { 'Content-Type': type }));
      expect(result.status).toBe('completed');
      expect(chunks.map((chunk) => chunk.kind)).toEqual(['data', 'done']);
    },
  );
});

describe('keepalive comments', () => {
  it('forever, and nothing else: deadline_exceeded, exactly one final chunk, the stream closed by the connector', async () => {
    const { result, chunks, server, output } = await readEvents(keepalives(20), { deadline: soon(500) });
    expectError(result, { code: 'deadline_exceeded', category: 'temporary', retryable: false, uncertain: false });
    expect(output?.http_status).toBe(200);
    expect(output?.events).toEqual([]);
    expect(server.requests).toHaveLength(1);
    expectOneFinalChunk(chunks, 'error');
    expect(await server.requestConnectionClosed(0)).toEqual({ byClient: true });
  });

  it('keep the stream alive past the idle timeout (each one resets it) until the deadline', async () => {
    // Idle timeout 1 s, a keepalive every 50 ms, deadline after 2.5 s: only resetting the idle timer lets the deadline come first.
    const { result, server } = await readEvents(keepalives(50), { deadline: soon(2_500), limits: { sseIdleTimeoutMs: 1_000 } });
    expectError(result, { code: 'deadline_exceeded', retryable: false, uncertain: false });
    expect(server.requests).toHaveLength(1);
  });

  it('a few, then the stream closes without a terminal event: stream_incomplete, reconciled', async () => {
    const { result, chunks, server, output } = await readEvents(keepalives(5, 5));
    expectError(result, { code: 'stream_incomplete', category: 'connector', retryable: false, uncertain: false });
    expect(output?.reconciliation?.http_status).toBe(200);
    expect(output?.reconciliation?.status?.status).toBe('running');
    expect(server.requests).toHaveLength(2);
    expectOneFinalChunk(chunks, 'error');
  });

  it('forever, past the stream byte limit: invalid_response (comments count), the stream closed', async () => {
    const { result, chunks, server } = await readEvents(keepalives(1), {
      deadline: soon(5_000),
      limits: { maxStreamResponseBytes: 2048, maxSseFrameBytes: 1024 },
    });
    expectError(result, { code: 'invalid_response', category: 'connector', retryable: false, uncertain: false, remote_status: 200 });
    expect(server.requests).toHaveLength(1);
    expectOneFinalChunk(chunks, 'error');
    expect(await server.requestConnectionClosed(0)).toEqual({ byClient: true });
  });

  // Not `transport`: the run is not known to have ended, so it is reconciled like any stream that ends without a terminal event.
  it('silence after the headers (not even a keepalive) past the idle timeout: stream_incomplete (the stream broke), reconciled', async () => {
    const silent: FaultHandler = async (exchange) => {
      await exchange.head(200, { 'Content-Type': SSE_TYPE, 'Transfer-Encoding': 'chunked' });
      while (await exchange.sleep(1000));
    };
    const { result, chunks, server, output } = await readEvents(silent, { deadline: soon(10_000), limits: { sseIdleTimeoutMs: 150 } });
    expectError(result, { code: 'stream_incomplete', category: 'connector', retryable: false, uncertain: false });
    expect(result.error?.details?.transport_code).toBe('UND_ERR_BODY_TIMEOUT');
    expect(result.error?.message).toContain('was silent for longer than sseIdleTimeoutMs (150 ms)');
    expect(output?.reconciliation?.http_status).toBe(200);
    expect(server.requests).toHaveLength(2);
    expectOneFinalChunk(chunks, 'error');
  });
});

describe('an onChunk that never settles', () => {
  const never = () => new Promise<void>(() => undefined);
  /** Two events, then keepalives: the stream itself would go on until the deadline. */
  const streamThenKeepalives: FaultHandler = async (exchange) => {
    await exchange.head(200, { 'Content-Type': SSE_TYPE, 'Transfer-Encoding': 'chunked' });
    await exchange.chunk(`${frame({ event: 'message.delta', delta: 'a' })}${frame({ event: 'message.delta', delta: 'b' })}`);
    while ((await exchange.chunk(': keepalive\n\n')) && (await exchange.sleep(20)));
  };
  /** The promise, or a rejection once `ms` have passed: a hang fails the test instead of timing it out. */
  const within = <T>(ms: number, promise: Promise<T>) =>
    Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`still pending after ${ms} ms`)), ms).unref())]);
  const stallAt = (sequence: number) => (chunk: AipStreamChunk) => (chunk.sequence === sequence ? never() : undefined);

  it('the deadline ends the call: deadline_exceeded naming the stalled chunk, the events seen so far, one final chunk, the stream closed', async () => {
    const { connector, server } = await rig(byRoute({ events: streamThenKeepalives, status: respondStatus('running') }));
    const chunks: AipStreamChunk[] = [];
    const result = await within(3_000, invokeValid(connector, 'run_events', { chunks, context: { deadline: soon(), onChunk: stallAt(0) } }));
    expectError(result, { code: 'deadline_exceeded', category: 'temporary', retryable: false, uncertain: false, remote_status: 200 });
    expect(result.error?.details?.stalled_chunk_sequence).toBe(0);
    expect(result.error?.message).toContain('onChunk');
    const output = result.output as EventsOutput;
    expect([output.events.map((event) => event.event), output.terminal]).toEqual([['message.delta'], false]);
    expect(chunks.map((chunk) => chunk.kind)).toEqual(['data', 'error']);
    expect(await server.requestConnectionClosed(0)).toEqual({ byClient: true });
    expect(server.requests).toHaveLength(1);
  });

  it('the caller aborting ends the call as cancelled; close() settles too', async () => {
    const { connector } = await rig(byRoute({ events: streamThenKeepalives, status: respondStatus('running') }));
    const controller = new AbortController();
    let stalled!: () => void;
    const reached = new Promise<void>((resolve) => (stalled = resolve));
    const onChunk = (chunk: AipStreamChunk) => (chunk.sequence === 1 ? (stalled(), never()) : undefined);
    const cancelled = invokeValid(connector, 'run_events', { context: { signal: controller.signal, deadline: soon(15_000), onChunk } });
    await reached;
    controller.abort();
    const result = await within(3_000, cancelled);
    expectError(result, { code: 'cancelled', status: 'cancelled', retryable: false, uncertain: false });
    expect(result.error?.details?.stalled_chunk_sequence).toBe(1);

    const { connector: closing } = await rig(byRoute({ events: streamThenKeepalives, status: respondStatus('running') }));
    const pending = invokeValid(closing, 'run_events', { context: { deadline: soon(15_000), onChunk: stallAt(0) } });
    await new Promise((resolve) => setTimeout(resolve, 100));
    await within(3_000, closing.close());
    const closed = await within(1_000, pending);
    expectError(closed, { code: 'cancelled', status: 'cancelled', retryable: false, uncertain: false });
    expect(closed.error?.details?.stalled_chunk_sequence).toBe(0);
  });

  it('a stalled terminal chunk: deadline_exceeded, and the output says the run ended', async () => {
    const body = `${frame({ event: 'message.delta', delta: 'a' })}${frame({ event: 'run.completed', output: 'a' })}`;
    const { connector } = await rig(byRoute({ events: (exchange) => exchange.respond(200, body, { 'Content-Type': SSE_TYPE }) }));
    const chunks: AipStreamChunk[] = [];
    const result = await within(3_000, invokeValid(connector, 'run_events', { chunks, context: { deadline: soon(), onChunk: stallAt(1) } }));
    expectError(result, { code: 'deadline_exceeded', retryable: false, uncertain: false });
    expect(result.error?.details?.stalled_chunk_sequence).toBe(1);
    expect(result.output).toMatchObject({ terminal: true, terminal_event: 'run.completed' });
    expect(chunks.map((chunk) => chunk.kind)).toEqual(['data', 'done']);
  });

  it('a final error chunk that never settles does not hold the call past its deadline', async () => {
    const { connector } = await rig();
    const chunks: AipStreamChunk[] = [];
    const result = await within(3_000, invokeValid(connector, 'run_events', { chunks, context: { deadline: soon(), onChunk: never } }));
    expectError(result, { code: 'not_found', retryable: false, uncertain: false });
    expect(chunks.map((chunk) => chunk.kind)).toEqual(['error']);
  });
});

async function waitFor(check: () => boolean, attempts = 500): Promise<void> {
  for (let attempt = 0; attempt < attempts; attempt++) {
    if (check()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('condition never held');
}

describe('a ledger that fails', () => {
  it('reconcile(): the rejection reaches its caller only, never as an unhandled rejection', async () => {
    const unhandled: string[] = [];
    const onUnhandled = (reason: unknown) => void unhandled.push(String(reason));
    process.on('unhandledRejection', onUnhandled);
    try {
      const ledger = createMemoryLedger();
      const failing: RunLedger = { ...ledger, openRuns: () => Promise.reject(new Error('ledger is down')) };
      const { connector, server } = await rig(respondStatus('running'), { ledger: failing });
      const outcome = await connector.reconcile().then(
        () => 'resolved',
        (error: unknown) => `rejected: ${String(error)}`,
      );
      for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setImmediate(resolve));
      expect({ outcome, unhandled }).toEqual({ outcome: 'rejected: Error: ledger is down', unhandled: [] });
      expect(server.requests).toHaveLength(0);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
