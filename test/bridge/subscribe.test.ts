/**
 * bridge.subscribe(): the bridge reads the Herm session's event stream itself and handles the
 * tool calls it carries, until the signal aborts; a wrong stream route fails loudly.
 */
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/harness.js';
import { HERM_KEY, acceptedFinals, acceptedRunning, bridgeEnvFactory, callTool, newSessionId, postedResults, scripts } from '../helpers/bridge-env.js';

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

  it('a wrong streamRoute: subscribe rejects naming the HTTP status', async () => {
    const { herm, bridge } = await startEnv({ bridge: { streamRoute: '/v2/sessions/{session_id}/events/live' } });
    const sessionId = newSessionId();
    await expect(bridge.subscribe(sessionId)).rejects.toThrow(/HTTP 404/);
    expect(herm.requests.map((request) => request.path)).toEqual([`/v2/sessions/${sessionId}/events/live`]);
    expect(herm.subscribers(sessionId)).toBe(0);
  });
});
