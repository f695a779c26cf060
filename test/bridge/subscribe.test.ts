/**
 * bridge.subscribe(): the bridge reads the Herm session's event stream itself and handles the
 * tool calls it carries, until the signal aborts. It never rejects: a stream failure (a wrong route,
 * Herm answering 503, a refused connection) goes to onError, or to the logger when there is none.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHermBridge } from 'aip-connector-hermes-agent';
import { eventually } from '../helpers/harness.js';
import {
  ENDPOINT,
  HERM_KEY,
  acceptedFinals,
  acceptedRunning,
  bridgeEnvFactory,
  callTool,
  newSessionId,
  postedResults,
  scripts,
} from '../helpers/bridge-env.js';
import { captureLogger } from '../helpers/capture-logger.js';

const startEnv = bridgeEnvFactory();

describe('bridge.subscribe', () => {
  it('reads /v1/sessions/{session_id}/stream, starts the run for a tool call on it, posts running and final; abort ends it', async () => {
    const { herm, hermes, bridge, ledger } = await startEnv();
    const sessionId = newSessionId();
    const abort = new AbortController();
    const subscribed = bridge.subscribe(sessionId, { signal: abort.signal });
    await eventually(() => herm.subscribers(sessionId) === 1, 'the bridge subscribed');

    const stream = herm.requests.filter((request) => request.method === 'GET');
    expect(stream).toHaveLength(1);
    expect(stream[0]?.path).toBe(`/v1/sessions/${sessionId}/stream`);
    expect(stream[0]?.headers['x-api-key']).toBe(HERM_KEY);
    expect(stream[0]?.headers.accept).toBe('text/event-stream');

    const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: scripts.quick('Rendered from the stream.') });
    const finals = await eventually(() => {
      const found = acceptedFinals(herm, sessionId, use.tool_use_id);
      return found.length > 0 ? found : undefined;
    }, 'the final result');
    await bridge.idle();

    expect(hermes.startCount()).toBe(1);
    expect(postedResults(herm, sessionId).map((posted) => posted.status)).toEqual(['running', 'completed']);
    expect(acceptedRunning(herm, sessionId, use.tool_use_id)).toHaveLength(1);
    expect(finals).toHaveLength(1);
    expect(finals[0]).toMatchObject({ status: 'completed', is_error: false, content: [{ type: 'text', text: 'Rendered from the stream.' }] });
    expect(herm.continuations(sessionId, use.tool_use_id)).toBe(1);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'done', final_status: 'completed' });

    // Its own results (and the session.tool_updated patch) came back on the stream: none of them started anything.
    // A redelivered tool-use event on the stream is deduplicated.
    herm.emitToolUse(sessionId, { name: use.name, input: use.input, tool_use_id: use.tool_use_id });
    const other = callTool(herm, sessionId, { prompt: 'Render again', sim_script: scripts.quick('Second render.') });
    await eventually(() => acceptedFinals(herm, sessionId, other.tool_use_id).length === 1, 'the second final result');
    await bridge.idle();
    expect(hermes.startCount()).toBe(2);
    expect(postedResults(herm, sessionId, use.tool_use_id)).toHaveLength(2);

    abort.abort();
    await expect(subscribed).resolves.toBeUndefined();
    await eventually(() => herm.subscribers(sessionId) === 0, 'the stream closed');
  });

  it('ends when its signal is already aborted, without connecting', async () => {
    const { herm, bridge } = await startEnv();
    const sessionId = newSessionId();
    await expect(bridge.subscribe(sessionId, { signal: AbortSignal.abort() })).resolves.toBeUndefined();
    expect(herm.requests).toHaveLength(0);
  });

  it('bridge.close() ends a subscription', async () => {
    const { herm, bridge } = await startEnv();
    const sessionId = newSessionId();
    const subscribed = bridge.subscribe(sessionId);
    await eventually(() => herm.subscribers(sessionId) === 1, 'the bridge subscribed');
    await bridge.close();
    await expect(subscribed).resolves.toBeUndefined();
    await eventually(() => herm.subscribers(sessionId) === 0, 'the stream closed');
    await expect(bridge.handleEvent(sessionId, callTool(herm, sessionId, { prompt: 'too late' }))).rejects.toThrow(/closed/);
  });

  it('a custom streamRoute is used as given', async () => {
    const { herm, bridge } = await startEnv({ bridge: { streamRoute: '/v1/sessions/{session_id}/stream?beta=1' } });
    const sessionId = newSessionId();
    const abort = new AbortController();
    const subscribed = bridge.subscribe(sessionId, { signal: abort.signal });
    await eventually(() => herm.subscribers(sessionId) === 1, 'the bridge subscribed');
    expect(herm.requests.map((request) => request.path)).toEqual([`/v1/sessions/${sessionId}/stream?beta=1`]);
    abort.abort();
    await subscribed;
  });

  it('a wrong streamRoute: subscribe resolves and reports the HTTP status to onError', async () => {
    const { herm, bridge } = await startEnv({ bridge: { streamRoute: '/v2/sessions/{session_id}/events/live' } });
    const sessionId = newSessionId();
    const errors: Error[] = [];
    await expect(bridge.subscribe(sessionId, { onError: (error) => errors.push(error) })).resolves.toBeUndefined();
    expect(errors.map((error) => error.message)).toEqual(['the Herm session stream answered HTTP 404']);
    expect(herm.requests.map((request) => request.path)).toEqual([`/v2/sessions/${sessionId}/events/live`]);
    expect(herm.subscribers(sessionId)).toBe(0);
  });
});

describe('bridge.subscribe when the Herm stream fails (README: `void bridge.subscribe(…)` must not crash the host)', () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => void unhandled.push(reason);
  let herm503: Server | undefined;
  beforeEach(() => {
    unhandled.length = 0;
    process.on('unhandledRejection', onUnhandled);
  });
  afterEach(async () => {
    process.off('unhandledRejection', onUnhandled);
    await closeHerm503();
  });

  async function closeHerm503(): Promise<void> {
    const server = herm503;
    herm503 = undefined;
    if (server) await new Promise((resolve) => server.close(resolve));
  }

  /** A Herm that answers every request 503, on loopback port 0. */
  async function unavailableHerm(): Promise<string> {
    herm503 = createServer((_request, response) => {
      response.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"type":"overloaded","retryable":true}}');
    });
    await new Promise<void>((resolve) => herm503?.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(herm503.address() as AddressInfo).port}`;
  }

  it('without onError: `void bridge.subscribe(…)` leaves no unhandled rejection; the failure is logged, without the key', async () => {
    const { connector, ledger } = await startEnv();
    const capture = captureLogger();
    const bridge = createHermBridge({
      herm: { baseUrl: await unavailableHerm(), apiKey: HERM_KEY },
      connector,
      endpointId: ENDPOINT,
      ledger,
      logger: capture.logger,
    });
    const sessionId = newSessionId();
    const subscribed = bridge.subscribe(sessionId);
    void subscribed;
    await expect(subscribed).resolves.toBeUndefined();
    await new Promise((resolve) => setImmediate(resolve));
    expect(unhandled).toEqual([]);
    expect(capture.lines).toContainEqual(
      expect.objectContaining({ level: 50, session_id: sessionId, err: 'the Herm session stream answered HTTP 503', msg: 'herm session stream failed' }),
    );
    expect(capture.raw()).not.toContain(HERM_KEY);
    await bridge.close();
  });

  it('with onError: called once with the failure, and the subscription resolves', async () => {
    const { connector, ledger } = await startEnv();
    const bridge = createHermBridge({ herm: { baseUrl: await unavailableHerm(), apiKey: HERM_KEY }, connector, endpointId: ENDPOINT, ledger });
    const errors: Error[] = [];
    await expect(bridge.subscribe(newSessionId(), { onError: (error) => errors.push(error) })).resolves.toBeUndefined();
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(Error);
    expect(errors[0]?.message).toBe('the Herm session stream answered HTTP 503');
    expect(unhandled).toEqual([]);
    await bridge.close();
  });

  it('an onError that throws is logged, never a rejection', async () => {
    const { connector, ledger } = await startEnv();
    const capture = captureLogger();
    const bridge = createHermBridge({
      herm: { baseUrl: await unavailableHerm(), apiKey: HERM_KEY },
      connector,
      endpointId: ENDPOINT,
      ledger,
      logger: capture.logger,
    });
    const onError = () => {
      throw new Error('reporter down');
    };
    await expect(bridge.subscribe(newSessionId(), { onError })).resolves.toBeUndefined();
    expect(capture.lines.some((line) => line.msg === 'herm session stream onError failed')).toBe(true);
    await bridge.close();
  });

  it('a refused connection (nothing listening) is reported the same way', async () => {
    const { connector, ledger } = await startEnv();
    const closedPort = await unavailableHerm();
    await closeHerm503();
    const bridge = createHermBridge({ herm: { baseUrl: closedPort, apiKey: HERM_KEY }, connector, endpointId: ENDPOINT, ledger });
    const errors: Error[] = [];
    await expect(bridge.subscribe(newSessionId(), { onError: (error) => errors.push(error) })).resolves.toBeUndefined();
    expect(errors.map((error) => error.message)).toEqual(['the Herm session stream failed (ECONNREFUSED)']);
    await bridge.close();
  });
});
