import { afterEach, describe, expect, it } from 'vitest';
import { call, closeSims, dataFrames, scripted, startRun, startSim, subscribe, waitFor, waitForStatus } from './support.js';

afterEach(closeSims);

describe('SSE lifecycle', () => {
  it('delivers a run with an approval, frames exactly `data: {...}\\n\\n`, then `: stream closed`', async () => {
    const sim = await startSim();
    const runId = await startRun(sim, { input: 'please run rm -rf ./build', session_id: 'demo-session' });
    const events = await subscribe(sim, runId);
    expect(events.status).toBe(200);
    expect(events.headers['content-type']).toBe('text/event-stream');
    expect(events.headers['cache-control']).toBe('no-cache');
    expect(events.headers['x-accel-buffering']).toBe('no');
    expect(events.headers['content-length']).toBeUndefined();
    // Hermes adds its security headers after the handler returns: too late for a stream.
    expect(events.headers['x-frame-options']).toBeUndefined();
    expect(events.headers['content-security-policy']).toBeUndefined();

    await events.waitForText('"approval.request"');
    expect(sim.run(runId)?.status).toBe('waiting_for_approval');
    const approval = await call(sim, 'POST', `/v1/runs/${runId}/approval`, { body: '{"choice": "  Approve "}' });
    expect(approval.status).toBe(200);
    expect(approval.text).toBe(`{"object": "hermes.run.approval_response", "run_id": "${runId}", "choice": "once", "resolved": 1}`);
    expect(await events.finished).toBe('end');

    const text = events.text();
    for (const frame of text.split('\n\n').filter(Boolean)) {
      expect(frame.startsWith('data: {') || frame.startsWith(': ')).toBe(true);
    }
    expect(text).toMatch(/^data: \{"event": "message\.delta", "run_id": "run_[0-9a-f]{32}", "timestamp": \d+\.\d+, "delta": "Checking "\}\n\n/);
    expect(text.endsWith(': stream closed\n\n')).toBe(true);
    expect(text).not.toMatch(/^(event|id|retry):/m);
    expect(dataFrames(text).map((event) => event['event'])).toEqual([
      'message.delta',
      'message.delta',
      'reasoning.available',
      'tool.started',
      'approval.request',
      'approval.responded',
      'tool.completed',
      'run.completed',
    ]);
    expect(dataFrames(text)[2]).toMatchObject({ text: 'Checking the disk.' });
    expect(dataFrames(text)[3]).toMatchObject({ tool: 'terminal', preview: 'rm -rf ./build' });
    const request = dataFrames(text)[4] ?? {};
    expect(Object.keys(request)).toEqual([
      'command',
      'pattern_key',
      'pattern_keys',
      'description',
      'allow_permanent',
      'event',
      'run_id',
      'timestamp',
      'choices',
    ]);
    expect(request['command']).toBe('rm -rf ./build');
    expect(request['allow_permanent']).toBe(true);
    expect(request['choices']).toEqual(['once', 'session', 'always', 'deny']);
    for (const event of dataFrames(text).filter((e) => e['event'] !== 'approval.request')) {
      expect(Object.keys(event).slice(0, 3)).toEqual(['event', 'run_id', 'timestamp']);
    }
    expect(sim.run(runId)?.events.map((event) => event['event'])).toEqual(dataFrames(text).map((event) => event['event']));
    const status = await call(sim, 'GET', `/v1/runs/${runId}`);
    expect(JSON.parse(status.text)).toMatchObject({ status: 'completed', last_event: 'run.completed', session_id: 'demo-session', output: 'Done.' });
  });

  it('writes `: keepalive` after keepaliveMs of silence', async () => {
    const sim = await startSim({ keepaliveMs: 30 });
    const runId = await startRun(
      sim,
      scripted([
        { type: 'delta', text: 'a' },
        { type: 'sleep', ms: 60_000 },
      ]),
    );
    const events = await subscribe(sim, runId);
    await waitFor(() => events.text().split(': keepalive\n\n').length > 3, 'three keepalives');
    expect(events.text().startsWith('data: ')).toBe(true);
    expect(events.text()).toMatch(/\n\n: keepalive\n\n: keepalive\n\n/);
    events.close();
  });

  it('answers 404 to a reconnect after the stream ended (after waiting for the stream to appear)', async () => {
    const sim = await startSim({ streamLookupMs: 60 });
    const runId = await startRun(sim);
    const first = await subscribe(sim, runId);
    expect(await first.finished).toBe('end');
    const again = await call(sim, 'GET', `/v1/runs/${runId}/events`);
    expect(again.status).toBe(404);
    expect(again.text).toBe(`{"error": {"message": "Run not found: ${runId}", "type": "invalid_request_error", "param": null, "code": "run_not_found"}}`);
    expect((await call(sim, 'GET', `/v1/runs/${runId}`)).status).toBe(200);
  });

  it('gives a late first subscriber the whole backlog, run.completed included', async () => {
    const sim = await startSim();
    const runId = await startRun(sim, { input: 'hello' });
    await waitForStatus(sim, runId, 'completed');
    const events = await subscribe(sim, runId);
    expect(await events.finished).toBe('end');
    expect(dataFrames(events.text()).map((event) => event['delta'] ?? event['event'])).toEqual(['Hello', ' world', 'reasoning.available', 'run.completed']);
    expect(events.text().endsWith(': stream closed\n\n')).toBe(true);
  });

  it('ends a mid-run disconnect: later GETs 404, the run goes on and finishes', async () => {
    const sim = await startSim({ streamLookupMs: 20 });
    const runId = await startRun(
      sim,
      scripted([
        { type: 'delta', text: 'a' },
        { type: 'sleep', ms: 100 },
        { type: 'delta', text: 'b' },
      ]),
    );
    const events = await subscribe(sim, runId);
    await events.waitForText('"a"');
    events.close();
    await waitFor(async () => (await call(sim, 'GET', `/v1/runs/${runId}/events`)).status === 404, 'stream removed');
    await waitForStatus(sim, runId, 'completed');
    expect(sim.run(runId)?.events.map((event) => event['event'])).toEqual(['message.delta', 'message.delta', 'reasoning.available', 'run.completed']);
  });

  it('lets two concurrent subscribers compete for one queue', async () => {
    const sim = await startSim({ keepaliveMs: 20, stepDelayMs: 5 });
    const deltas6 = Array.from({ length: 6 }, (_, i) => ({ type: 'delta' as const, text: `d${i}` }));
    const runId = await startRun(sim, scripted([{ type: 'approval', command: 'hold' }, ...deltas6]));
    const one = await subscribe(sim, runId);
    const two = await subscribe(sim, runId);
    // Both are attached once their headers arrived; now let the run go on.
    expect((await call(sim, 'POST', `/v1/runs/${runId}/approval`, { body: '{"choice": "once"}' })).status).toBe(200);
    await waitForStatus(sim, runId, 'completed');
    const winner = await Promise.race([one.finished.then(() => one), two.finished.then(() => two)]);
    const loser = winner === one ? two : one;
    const deltas = [...dataFrames(one.text()), ...dataFrames(two.text())].filter((e) => e['event'] === 'message.delta');
    expect(deltas.map((e) => e['delta']).sort()).toEqual(['d0', 'd1', 'd2', 'd3', 'd4', 'd5']);
    expect(winner.text().endsWith(': stream closed\n\n')).toBe(true);
    expect(loser.text()).not.toContain(': stream closed');
    const before = loser.text().length;
    await waitFor(() => loser.text().slice(before).includes(': keepalive'), 'the other subscriber keeps getting keepalives');
    loser.close();
  });

  it('waits up to streamLookupMs for the stream to appear, then 404', async () => {
    const sim = await startSim({ streamLookupMs: 30 });
    const answer = await call(sim, 'GET', '/v1/runs/run_00000000000000000000000000000000/events');
    expect(answer.status).toBe(404);
    expect(JSON.parse(answer.text)).toEqual({
      error: { message: 'Run not found: run_00000000000000000000000000000000', type: 'invalid_request_error', param: null, code: 'run_not_found' },
    });
  });
});
