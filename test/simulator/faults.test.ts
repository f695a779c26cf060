import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { AUTH, call, closeSims, startRun, startSim } from './support.js';

afterEach(closeSims);

describe('injectFault', () => {
  it('answers the next matching request instead of the handler, once by default', async () => {
    const sim = await startSim();
    sim.injectFault({ route: 'start', response: { status: 503, headers: { 'Retry-After': '2' }, body: '{"error": "busy"}' } });
    const faulted = await call(sim, 'POST', '/v1/runs', { body: '{"input": "hi"}' });
    expect(faulted.status).toBe(503);
    expect(faulted.headers['retry-after']).toBe('2');
    expect(faulted.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(faulted.headers['x-frame-options']).toBe('DENY');
    expect(faulted.text).toBe('{"error": "busy"}');
    expect(sim.startCount()).toBe(0);
    expect(sim.requests.at(-1)?.body).toBe('{"input": "hi"}');
    expect((await call(sim, 'POST', '/v1/runs', { body: '{"input": "hi"}' })).status).toBe(202);
  });

  it('honours `times` and matches only its route', async () => {
    const sim = await startSim();
    const runId = await startRun(sim);
    sim.injectFault({ route: 'status', times: 2, response: { status: 502 } });
    expect((await call(sim, 'POST', `/v1/runs/${runId}/stop`)).status).not.toBe(502);
    expect((await call(sim, 'GET', `/v1/runs/${runId}`)).status).toBe(502);
    expect((await call(sim, 'GET', `/v1/runs/${runId}`)).status).toBe(502);
    expect((await call(sim, 'GET', `/v1/runs/${runId}`)).status).toBe(200);
  });

  it('applies after auth: an unauthenticated request still gets 401 and leaves the fault armed', async () => {
    const sim = await startSim();
    sim.injectFault({ route: 'start', response: { status: 500, body: 'boom', headers: { 'Content-Type': 'text/plain' } } });
    expect((await call(sim, 'POST', '/v1/runs', { body: '{}', headers: { authorization: 'Bearer nope' } })).status).toBe(401);
    const faulted = await call(sim, 'POST', '/v1/runs', { body: '{}' });
    expect(faulted.status).toBe(500);
    expect(faulted.headers['content-type']).toBe('text/plain');
    expect(faulted.text).toBe('boom');
  });

  it('destroys the socket without an answer', async () => {
    const sim = await startSim();
    sim.injectFault({ route: 'start', destroy: true });
    await expect(
      request(`${sim.url}/v1/runs`, { method: 'POST', reset: true, headers: { ...AUTH, 'content-type': 'application/json' }, body: '{"input": "hi"}' }),
    ).rejects.toThrow();
    expect(sim.startCount()).toBe(0);
    expect((await call(sim, 'POST', '/v1/runs', { body: '{"input": "hi"}' })).status).toBe(202);
  });

  it('can fault the events route (the stream stays for the next subscriber)', async () => {
    const sim = await startSim();
    const runId = await startRun(sim);
    sim.injectFault({ route: 'events', response: { status: 404, body: '' } });
    expect((await call(sim, 'GET', `/v1/runs/${runId}/events`)).status).toBe(404);
    const events = await call(sim, 'GET', `/v1/runs/${runId}/events`);
    expect(events.status).toBe(200);
    expect(events.text).toContain('"run.completed"');
  });

  it('rejects a fault with both or neither of response/destroy', async () => {
    const sim = await startSim();
    expect(() => sim.injectFault({ route: 'stop' })).toThrow(TypeError);
    expect(() => sim.injectFault({ route: 'stop', destroy: true, response: { status: 500 } })).toThrow(TypeError);
  });
});
