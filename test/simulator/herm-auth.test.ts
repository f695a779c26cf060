import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { startHermSimulator, type HermSimulator } from '../../src/simulator/index.js';

const KEY = 'herm_key_auth_0123456789';
const started: HermSimulator[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((sim) => sim.close()));
});

async function start(): Promise<HermSimulator> {
  const sim = await startHermSimulator({ apiKey: KEY });
  started.push(sim);
  return sim;
}

async function send(sim: HermSimulator, method: 'GET' | 'POST' | 'PUT', path: string, headers: Record<string, string>, body?: string) {
  const res = await request(`${sim.url}${path}`, { method, reset: true, headers, ...(body === undefined ? {} : { body }) });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

const RUNNING = JSON.stringify({
  events: [
    { type: 'user.custom_tool_result', tool_use_id: 'custom_toolu_1', content: [{ type: 'text', text: 'started' }], status: 'running', is_error: false },
  ],
});
const UNAUTHORIZED = { error: { type: 'authentication_error', message: 'invalid x-api-key' } };

describe('Herm simulator: x-api-key authentication', () => {
  it('answers 401 to a missing, wrong, differently sized or Bearer-style key, and processes nothing', async () => {
    const sim = await start();
    sim.emitToolUse('session_a', { name: 'render', input: {}, tool_use_id: 'custom_toolu_1' });
    const json = { 'content-type': 'application/json' };
    for (const headers of [
      json,
      { ...json, 'x-api-key': 'herm_key_auth_0123456780' },
      { ...json, 'x-api-key': 'short' },
      { ...json, authorization: `Bearer ${KEY}` },
    ]) {
      const answer = await send(sim, 'POST', '/v1/sessions/session_a/events', headers, RUNNING);
      expect(answer.status).toBe(401);
      expect(answer.headers['content-type']).toBe('application/json');
      expect(JSON.parse(answer.text)).toEqual(UNAUTHORIZED);
    }
    expect(sim.accepted()).toEqual([]);
    expect(sim.toolCall('session_a', 'custom_toolu_1')?.state).toBe('pending');
    expect(sim.requests).toHaveLength(4);
    expect(sim.requests[1]).toMatchObject({ method: 'POST', path: '/v1/sessions/session_a/events', headers: { 'x-api-key': 'herm_key_auth_0123456780' } });
  });

  it('protects the stream route too', async () => {
    const sim = await start();
    const answer = await send(sim, 'GET', '/v1/sessions/session_a/stream', { 'x-api-key': 'nope' });
    expect(answer.status).toBe(401);
    expect(JSON.parse(answer.text)).toEqual(UNAUTHORIZED);
    expect(sim.subscribers('session_a')).toBe(0);
  });

  it('accepts the right key', async () => {
    const sim = await start();
    const answer = await send(sim, 'POST', '/v1/sessions/session_a/events', { 'x-api-key': KEY, 'content-type': 'application/json' }, RUNNING);
    expect(answer.status).toBe(202);
  });

  it('answers 404 to anything else, before looking at the key', async () => {
    const sim = await start();
    const cases: Array<['GET' | 'POST' | 'PUT', string]> = [
      ['GET', '/'],
      ['GET', '/v1/sessions/session_a/events'],
      ['PUT', '/v1/sessions/session_a/events'],
      ['POST', '/v1/sessions/session_a/stream'],
      ['POST', '/v1/sessions//events'],
      ['POST', '/v1/sessions/session_a/events/extra'],
      ['POST', '/v1/runs'],
    ];
    for (const [method, path] of cases) {
      const answer = await send(sim, method, path, { 'x-api-key': KEY }, method === 'GET' ? undefined : '{}');
      expect(answer.status, `${method} ${path}`).toBe(404);
      expect(JSON.parse(answer.text)).toEqual({ error: { type: 'not_found_error', message: 'not found' } });
    }
    expect((await send(sim, 'GET', '/nowhere', {})).status).toBe(404);
  });

  it('refuses to start without an API key', async () => {
    await expect(startHermSimulator({ apiKey: '' })).rejects.toThrow(/apiKey/);
  });
});
