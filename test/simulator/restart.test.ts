import { afterEach, describe, expect, it } from 'vitest';
import { call, closeSims, scripted, startRun, startSim, statusOf, subscribe, waitForStatus } from './support.js';

afterEach(closeSims);

const LONG = scripted([
  { type: 'delta', text: 'x' },
  { type: 'sleep', ms: 60_000 },
]);

describe('restart()', () => {
  it('at the pin forgets everything: every id answers 404 and open streams drop', async () => {
    const sim = await startSim({ streamLookupMs: 10 });
    const done = await startRun(sim);
    await waitForStatus(sim, done, 'completed');
    const live = await startRun(sim, LONG);
    const events = await subscribe(sim, live);
    await events.waitForText('"x"');

    sim.restart();
    expect(await events.finished).toBe('error');
    for (const runId of [done, live]) {
      expect((await call(sim, 'GET', `/v1/runs/${runId}`)).status).toBe(404);
      expect((await call(sim, 'GET', `/v1/runs/${runId}/events`)).status).toBe(404);
      expect((await call(sim, 'POST', `/v1/runs/${runId}/stop`)).status).toBe(404);
      expect((await call(sim, 'POST', `/v1/runs/${runId}/approval`, { body: '{"choice": "once"}' })).status).toBe(404);
    }
    expect(sim.run(live)?.events.map((e) => e['event'])).toEqual(['message.delta']);
    expect(sim.startCount()).toBe(2);
    expect((await call(sim, 'POST', '/v1/runs', { body: '{"input": "again"}' })).status).toBe(202);
  });

  it('in the later profile keeps terminal statuses and marks unsettled runs interrupted', async () => {
    const sim = await startSim({ profile: 'later' });
    const done = await startRun(sim);
    await waitForStatus(sim, done, 'completed');
    const live = await startRun(sim, LONG);
    await waitForStatus(sim, live, 'running');

    sim.restart();
    expect((await statusOf(sim, done))['status']).toBe('completed');
    const interrupted = await statusOf(sim, live);
    expect(interrupted).toMatchObject({ status: 'interrupted', error: 'The gateway restarted before this run settled.' });
    expect(Object.keys(interrupted).at(-1)).toBe('error');
    const stop = await call(sim, 'POST', `/v1/runs/${live}/stop`);
    expect(stop.status).toBe(409);
    expect(JSON.parse(stop.text).error.code).toBe('run_not_active');
    expect(JSON.parse((await call(sim, 'POST', `/v1/runs/${done}/stop`)).text).status).toBe('completed');
  });

  it('in the later profile keeps idempotency records', async () => {
    const sim = await startSim({ profile: 'later' });
    const headers = { 'Idempotency-Key': 'order-1' };
    const first = await call(sim, 'POST', '/v1/runs', { body: '{"input": "hi"}', headers });
    sim.restart();
    const again = await call(sim, 'POST', '/v1/runs', { body: '{"input": "hi"}', headers });
    expect(again.headers['idempotency-replayed']).toBe('true');
    expect(JSON.parse(again.text).run_id).toBe(JSON.parse(first.text).run_id);
    expect(sim.startCount()).toBe(1);
  });
});
