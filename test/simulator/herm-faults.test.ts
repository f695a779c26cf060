import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import type { HermSimulator } from '../../src/simulator/index.js';
import { KEY, start, result, post, only } from './herm-support.js';

async function postRejected(sim: HermSimulator, sessionId: string, events: unknown[]): Promise<unknown> {
  return post(sim, sessionId, events).then(
    (answer) => {
      throw new Error(`expected a dropped connection, got ${answer.status}`);
    },
    (error: unknown) => error,
  );
}

describe('Herm simulator: injected faults on POST …/events', () => {
  it('answers a 503 burst without processing, then recovers', async () => {
    const sim = await start();
    const use = sim.emitToolUse('session_1', { name: 'render', input: {} });
    only(await post(sim, 'session_1', [result(use.tool_use_id, 'running')]));
    sim.injectFault({ status: 503, times: 3 });
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const answer = await post(sim, 'session_1', [result(use.tool_use_id, 'completed')]);
      expect(answer.status).toBe(503);
      expect(answer.error).toEqual({ type: 'api_error', message: 'simulated fault', retryable: true });
    }
    expect(sim.continuations('session_1', use.tool_use_id)).toBe(0);
    expect(sim.toolCall('session_1', use.tool_use_id)?.state).toBe('running');
    only(await post(sim, 'session_1', [result(use.tool_use_id, 'completed')]));
    expect(sim.continuations('session_1', use.tool_use_id)).toBe(1);
    expect(sim.requests.filter((req) => req.method === 'POST')).toHaveLength(5);
    expect(sim.requests.at(-2)?.body).toContain('"status":"completed"');
  });

  it('answers a custom status and body', async () => {
    const sim = await start();
    sim.injectFault({ status: 429, body: '{"error":{"type":"rate_limit_error","message":"slow down"}}' });
    const answer = await post(sim, 'session_1', [result('custom_toolu_1', 'running')]);
    expect(answer.status).toBe(429);
    expect(answer.error).toEqual({ type: 'rate_limit_error', message: 'slow down' });
    expect(sim.accepted()).toEqual([]);
  });

  it('drop before-processing: the connection is destroyed and nothing is accepted', async () => {
    const sim = await start();
    const use = sim.emitToolUse('session_1', { name: 'render', input: {} });
    sim.injectFault({ drop: 'before-processing' });
    await postRejected(sim, 'session_1', [result(use.tool_use_id, 'running')]);
    expect(sim.accepted()).toEqual([]);
    expect(sim.toolCall('session_1', use.tool_use_id)?.state).toBe('pending');
    only(await post(sim, 'session_1', [result(use.tool_use_id, 'running')]));
    expect(sim.accepted()).toHaveLength(1);
  });

  it('drop after-processing on the final result: it was accepted, and the retry returns it without a second continuation', async () => {
    const sim = await start();
    const use = sim.emitToolUse('session_1', { name: 'render', input: {} });
    const running = only(await post(sim, 'session_1', [result(use.tool_use_id, 'running')]));
    sim.injectFault({ drop: 'after-processing' });
    await postRejected(sim, 'session_1', [result(use.tool_use_id, 'completed', 'Render completed.')]);
    const accepted = sim.accepted('session_1');
    expect(accepted).toHaveLength(2);
    expect(sim.continuations('session_1', use.tool_use_id)).toBe(1);

    const retry = only(await post(sim, 'session_1', [result(use.tool_use_id, 'completed', 'Render completed.')]));
    expect(retry).toEqual(accepted[1]);
    expect(sim.toolCall('session_1', use.tool_use_id)).toMatchObject({ state: 'completed', running_event_id: running.id, final_event_id: retry.id });
    expect(sim.continuations('session_1', use.tool_use_id)).toBe(1);
    expect(sim.history('session_1')).toEqual([retry]);
  });

  it('drop after-processing on the kickoff: the running result was accepted, and a retry returns it', async () => {
    const sim = await start();
    const use = sim.emitToolUse('session_1', { name: 'render', input: {} });
    sim.injectFault({ drop: 'after-processing' });
    await postRejected(sim, 'session_1', [result(use.tool_use_id, 'running')]);
    expect(sim.toolCall('session_1', use.tool_use_id)?.state).toBe('running');
    const retry = only(await post(sim, 'session_1', [result(use.tool_use_id, 'running')]));
    expect(retry.id).toBe(sim.toolCall('session_1', use.tool_use_id)?.running_event_id);
    expect(sim.accepted()).toHaveLength(1);
  });

  it('faults queue in order, apply after authentication and leave the stream route alone', async () => {
    const sim = await start();
    sim.injectFault({ status: 500 });
    sim.injectFault({ drop: 'before-processing' });
    const unauthorized = await request(`${sim.url}/v1/sessions/session_1/events`, {
      method: 'POST',
      reset: true,
      headers: { 'x-api-key': 'wrong' },
      body: '{}',
    });
    expect(unauthorized.statusCode).toBe(401);
    await unauthorized.body.text();
    const stream = await request(`${sim.url}/v1/sessions/session_1/stream`, { reset: true, headers: { 'x-api-key': KEY } });
    expect(stream.statusCode).toBe(200);
    stream.body.destroy();
    expect((await post(sim, 'session_1', [result('custom_toolu_1', 'running')])).status).toBe(500);
    await postRejected(sim, 'session_1', [result('custom_toolu_1', 'running')]);
    only(await post(sim, 'session_1', [result('custom_toolu_1', 'running')]));
  });

  it('rejects a fault with both or neither of status and drop', () => {
    return start().then((sim) => {
      expect(() => sim.injectFault({})).toThrow(TypeError);
      expect(() => sim.injectFault({ times: 2 })).toThrow(TypeError);
      expect(() => sim.injectFault({ status: 503, drop: 'after-processing' })).toThrow(TypeError);
      expect(() => sim.injectFault({ drop: 'before-processing', body: 'x' })).toThrow(TypeError);
    });
  });
});
