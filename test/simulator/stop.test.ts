import { afterEach, describe, expect, it } from 'vitest';
import { call, closeSims, dataFrames, normalize, readCapture, scripted, startRun, startSim, statusOf, subscribe, waitFor, waitForStatus } from './support.js';

afterEach(closeSims);

const LONG_RUN = scripted([
  { type: 'delta', text: 'working' },
  { type: 'sleep', ms: 60_000 },
  { type: 'complete', output: 'never' },
]);

describe('stop at the pin', () => {
  it('cancels a live run before answering; the stream ends with run.cancelled like the capture', async () => {
    const sim = await startSim();
    const runId = await startRun(sim, LONG_RUN);
    const events = await subscribe(sim, runId);
    await events.waitForText('"working"');
    const stop = await call(sim, 'POST', `/v1/runs/${runId}/stop`);
    expect(stop.status).toBe(200);
    expect(stop.text).toBe(`{"run_id": "${runId}", "status": "stopping"}`);
    expect((await statusOf(sim, runId))['status']).toBe('cancelled');
    expect((await statusOf(sim, runId))['last_event']).toBe('run.cancelled');
    expect(await events.finished).toBe('end');

    const captured = readCapture('21-events-cancelled.http').response.body.replace(/: keepalive\n\n/g, '');
    expect(normalize(events.text().replace(/: keepalive\n\n/g, ''))).toBe(normalize(captured));
    expect(Object.keys(await statusOf(sim, runId))).toEqual(['object', 'run_id', 'status', 'updated_at', 'created_at', 'session_id', 'model', 'last_event']);
  });

  it('answers 404 for a finished run, an unknown run, and a second stop', async () => {
    const sim = await startSim();
    const finished = await startRun(sim);
    await waitForStatus(sim, finished, 'completed');
    expect((await call(sim, 'POST', `/v1/runs/${finished}/stop`)).status).toBe(404);
    expect((await call(sim, 'POST', '/v1/runs/run_unknown/stop')).text).toBe(
      '{"error": {"message": "Run not found: run_unknown", "type": "invalid_request_error", "param": null, "code": "run_not_found"}}',
    );
    const live = await startRun(sim, LONG_RUN);
    expect((await call(sim, 'POST', `/v1/runs/${live}/stop`)).status).toBe(200);
    expect((await call(sim, 'POST', `/v1/runs/${live}/stop`)).status).toBe(404);
  });

  it('denies a pending approval and ends the run', async () => {
    const sim = await startSim();
    const runId = await startRun(
      sim,
      scripted([
        { type: 'approval', command: 'rm -rf /tmp/x' },
        { type: 'tool', tool: 'terminal' },
      ]),
    );
    await waitForStatus(sim, runId, 'waiting_for_approval');
    expect(sim.run(runId)?.pendingApprovals).toBe(1);
    expect((await call(sim, 'POST', `/v1/runs/${runId}/stop`)).status).toBe(200);
    expect(sim.run(runId)?.pendingApprovals).toBe(0);
    expect(sim.run(runId)?.status).toBe('cancelled');
    expect(sim.run(runId)?.events.map((e) => e['event'])).toEqual(['tool.started', 'approval.request', 'run.cancelled']);
    const approval = await call(sim, 'POST', `/v1/runs/${runId}/approval`, { body: '{"choice": "once"}' });
    expect(JSON.parse(approval.text).error.code).toBe('approval_not_active');
  });

  it('cancels a run stopped right after its start', async () => {
    const sim = await startSim();
    const answer = await call(sim, 'POST', '/v1/runs', { body: JSON.stringify(LONG_RUN) });
    const runId = (JSON.parse(answer.text) as { run_id: string }).run_id;
    const stop = await call(sim, 'POST', `/v1/runs/${runId}/stop`);
    expect(stop.status).toBe(200);
    expect(sim.run(runId)?.status).toBe('cancelled');
  });
});

describe('stop in the later profile', () => {
  it('answers 200 stopping at once; the status reads stopping until the current step yields, then cancelled', async () => {
    const sim = await startSim({ profile: 'later' });
    const runId = await startRun(sim, LONG_RUN);
    const events = await subscribe(sim, runId);
    await events.waitForText('"working"');
    const stop = await call(sim, 'POST', `/v1/runs/${runId}/stop`);
    expect(stop.text).toBe(`{"run_id": "${runId}", "status": "stopping"}`);
    await waitForStatus(sim, runId, 'cancelled');
    expect(await events.finished).toBe('end');
    expect(dataFrames(events.text()).map((e) => e['event'])).toEqual(['message.delta', 'run.cancelled']);
  });

  it('keeps the status at stopping while the current step has not yielded', async () => {
    const sim = await startSim({ profile: 'later', stepDelayMs: 60_000 });
    const runId = await startRun(
      sim,
      scripted([
        { type: 'delta', text: 'working' },
        { type: 'delta', text: 'more' },
      ]),
    );
    await waitFor(() => (sim.run(runId)?.events.length ?? 0) > 0, 'first delta');
    const stop = await call(sim, 'POST', `/v1/runs/${runId}/stop`);
    expect(stop.status).toBe(200);
    expect(await statusOf(sim, runId)).toMatchObject({ status: 'stopping', last_event: 'run.stopping' });
    const again = await call(sim, 'POST', `/v1/runs/${runId}/stop`);
    expect(JSON.parse(again.text)).toEqual({ run_id: runId, status: 'stopping' });
  });

  it('answers a finished run with its status object', async () => {
    const sim = await startSim({ profile: 'later' });
    const runId = await startRun(sim);
    await waitForStatus(sim, runId, 'completed');
    const stop = await call(sim, 'POST', `/v1/runs/${runId}/stop`);
    expect(stop.status).toBe(200);
    expect(stop.text).toBe((await call(sim, 'GET', `/v1/runs/${runId}`)).text);
    expect(JSON.parse(stop.text)).toMatchObject({ object: 'hermes.run', status: 'completed' });
  });
});
