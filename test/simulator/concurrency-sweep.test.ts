import { afterEach, describe, expect, it } from 'vitest';
import { API_KEY, call, closeSims, rawExchange, scripted, startRun, startSim, statusOf, subscribe, waitFor, waitForStatus } from './support.js';

afterEach(closeSims);

const LONG = scripted([
  { type: 'delta', text: 'x' },
  { type: 'sleep', ms: 60_000 },
]);

describe('the 429 gate', () => {
  it('answers 429 with Retry-After: 1 before the body is sent', async () => {
    const sim = await startSim({ maxConcurrentRuns: 1 });
    await startRun(sim, LONG);
    // Headers only: the body never comes, yet the answer does.
    const answer = await rawExchange(
      sim.port,
      `POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${API_KEY}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n`,
    );
    expect(answer.statusLine).toBe('HTTP/1.1 429 Too Many Requests');
    expect(answer.header('Retry-After')).toBe('1');
    expect(answer.body).toBe(
      '{"error": {"message": "Too many concurrent runs (max 1)", "type": "rate_limit_error", "param": null, "code": "rate_limit_exceeded"}}',
    );
    expect(sim.startCount()).toBe(1);
  });

  it('keeps the slot of a finished run nobody read until its stream is consumed', async () => {
    const sim = await startSim({ maxConcurrentRuns: 1 });
    const runId = await startRun(sim);
    await waitForStatus(sim, runId, 'completed');
    expect((await call(sim, 'POST', '/v1/runs', { body: '{"input": "b"}' })).status).toBe(429);
    const events = await subscribe(sim, runId);
    await events.finished;
    expect((await call(sim, 'POST', '/v1/runs', { body: '{"input": "b"}' })).status).toBe(202);
  });

  it('releases the slot when the SSE client disconnects mid-run, while the run goes on', async () => {
    const sim = await startSim({ maxConcurrentRuns: 1 });
    const runId = await startRun(sim, LONG);
    const events = await subscribe(sim, runId);
    await events.waitForText('"x"');
    events.close();
    await waitFor(async () => (await call(sim, 'POST', '/v1/runs', { body: '{"input": "b"}' })).status === 202, 'slot released');
    expect(sim.run(runId)?.status).toBe('running');
  });

  it('is disabled by 0 and by negative limits', async () => {
    for (const maxConcurrentRuns of [0, -3]) {
      const sim = await startSim({ maxConcurrentRuns });
      for (let i = 0; i < 12; i++) await startRun(sim, LONG);
      expect(sim.startCount()).toBe(12);
    }
  });
});

describe('the sweep', () => {
  it('at the pin drops old streams with their control refs; the status stays, stop 404, approval 409', async () => {
    const sim = await startSim({ streamTtlMs: 0, streamLookupMs: 10, maxConcurrentRuns: 1 });
    const runId = await startRun(
      sim,
      scripted([
        { type: 'approval', command: 'x' },
        { type: 'sleep', ms: 60_000 },
      ]),
    );
    await waitForStatus(sim, runId, 'waiting_for_approval');
    sim.sweep();
    expect((await call(sim, 'GET', `/v1/runs/${runId}/events`)).status).toBe(404);
    expect((await call(sim, 'POST', `/v1/runs/${runId}/stop`)).status).toBe(404);
    const approval = await call(sim, 'POST', `/v1/runs/${runId}/approval`, { body: '{"choice": "once"}' });
    expect(JSON.parse(approval.text).error.code).toBe('approval_not_active');
    expect((await statusOf(sim, runId))['status']).toBe('waiting_for_approval');
    expect((await call(sim, 'POST', '/v1/runs', { body: '{"input": "b"}' })).status).toBe(202);
  });

  it('at the pin keeps feeding an open subscriber deltas and run.* but drops tool events after the sweep', async () => {
    const sim = await startSim({ streamTtlMs: 0 });
    const runId = await startRun(
      sim,
      scripted([
        { type: 'approval', command: 'hold' },
        { type: 'tool', tool: 'terminal' },
        { type: 'delta', text: 'after' },
        { type: 'complete', output: 'done' },
      ]),
    );
    const events = await subscribe(sim, runId);
    await events.waitForText('"approval.request"');
    sim.sweep(); // denies the pending approval: the script goes on
    expect(await events.finished).toBe('end');
    expect(events.text()).toContain('"delta": "\\n\\nafter"');
    expect(events.text()).toContain('"run.completed"');
    expect(events.text()).toContain('"tool.started"'); // sent before the sweep
    expect(events.text()).not.toContain('"tool.completed"');
    expect(events.text()).not.toContain('"reasoning.available"');
    expect(events.text().endsWith(': stream closed\n\n')).toBe(true);
  });

  it('in the later profile keeps a live run controllable and counted by the gate', async () => {
    const sim = await startSim({ profile: 'later', streamTtlMs: 0, streamLookupMs: 10, maxConcurrentRuns: 1 });
    const runId = await startRun(
      sim,
      scripted([
        { type: 'approval', command: 'x' },
        { type: 'sleep', ms: 60_000 },
      ]),
    );
    await waitForStatus(sim, runId, 'waiting_for_approval');
    sim.sweep();
    expect((await call(sim, 'GET', `/v1/runs/${runId}/events`)).status).toBe(404);
    expect((await call(sim, 'POST', '/v1/runs', { body: '{"input": "b"}' })).status).toBe(429);
    expect((await call(sim, 'POST', `/v1/runs/${runId}/approval`, { body: '{"choice": "once"}' })).status).toBe(200);
    expect((await call(sim, 'POST', `/v1/runs/${runId}/stop`)).status).toBe(200);
    await waitForStatus(sim, runId, 'cancelled');
    expect((await call(sim, 'POST', '/v1/runs', { body: '{"input": "b"}' })).status).toBe(202);
  });

  it('forgets terminal statuses retentionMs after updated_at, never live ones', async () => {
    const sim = await startSim({ retentionMs: 0 });
    const done = await startRun(sim);
    const live = await startRun(sim, LONG);
    await waitForStatus(sim, done, 'completed');
    await waitForStatus(sim, live, 'running');
    sim.sweep();
    expect((await call(sim, 'GET', `/v1/runs/${done}`)).status).toBe(404);
    expect((await call(sim, 'GET', `/v1/runs/${live}`)).status).toBe(200);
    expect(sim.run(done)?.status).toBe('completed');
  });

  it('runs on its own every sweepIntervalMs', async () => {
    const sim = await startSim({ retentionMs: 0, sweepIntervalMs: 10 });
    const runId = await startRun(sim);
    await waitForStatus(sim, runId, 'completed');
    await waitFor(async () => (await call(sim, 'GET', `/v1/runs/${runId}`)).status === 404, 'swept status');
  });
});
