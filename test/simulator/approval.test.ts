import { afterEach, describe, expect, it } from 'vitest';
import { call, closeSims, scripted, startRun, startSim, statusOf, waitFor, waitForStatus } from './support.js';

afterEach(closeSims);

const GUARDED = scripted([
  { type: 'approval', command: 'rm -rf ./build', pattern_key: 'recursive delete', description: 'recursive delete' },
  { type: 'tool', tool: 'terminal' },
  { type: 'complete', output: 'ok' },
]);

function approve(sim: Parameters<typeof call>[0], runId: string, body: unknown): ReturnType<typeof call> {
  return call(sim, 'POST', `/v1/runs/${runId}/approval`, { body: typeof body === 'string' ? body : JSON.stringify(body) });
}

describe('approval route', () => {
  it('keeps approval queues per run even when two runs share a session_id', async () => {
    const sim = await startSim();
    const first = await startRun(sim, { ...GUARDED, session_id: 'shared' });
    const second = await startRun(sim, { ...GUARDED, session_id: 'shared' });
    await waitForStatus(sim, first, 'waiting_for_approval');
    await waitForStatus(sim, second, 'waiting_for_approval');

    const answer = await approve(sim, first, { choice: 'once', resolve_all: true });
    expect(JSON.parse(answer.text)).toEqual({ object: 'hermes.run.approval_response', run_id: first, choice: 'once', resolved: 1 });
    await waitForStatus(sim, first, 'completed');
    expect(sim.run(second)?.status).toBe('waiting_for_approval');
    expect(sim.run(second)?.pendingApprovals).toBe(1);
    expect((await approve(sim, second, { choice: 'deny', all: 'false' })).status).toBe(200);
    await waitForStatus(sim, second, 'completed');
  });

  it('sets running with last_event approval.responded right after the answer', async () => {
    const sim = await startSim();
    const runId = await startRun(
      sim,
      scripted([
        { type: 'approval', command: 'x' },
        { type: 'sleep', ms: 60_000 },
      ]),
    );
    await waitForStatus(sim, runId, 'waiting_for_approval');
    expect(await statusOf(sim, runId)).toMatchObject({ status: 'waiting_for_approval', last_event: 'approval.request' });
    await approve(sim, runId, { choice: 'session' });
    expect(await statusOf(sim, runId)).toMatchObject({ status: 'running', last_event: 'approval.responded' });
  });

  it('blocks the command on deny: the next tool step reports error true', async () => {
    const sim = await startSim();
    const runId = await startRun(sim, GUARDED);
    await waitForStatus(sim, runId, 'waiting_for_approval');
    await approve(sim, runId, { choice: 'DENY' });
    await waitForStatus(sim, runId, 'completed');
    const completed = sim.run(runId)?.events.find((event) => event['event'] === 'tool.completed');
    expect(completed).toMatchObject({ tool: 'terminal', error: true });
    const started = sim.run(runId)?.events.find((event) => event['event'] === 'tool.started');
    expect(started).toMatchObject({ preview: 'rm -rf ./build' });
  });

  it('normalizes choices and rejects others with invalid_approval_choice', async () => {
    const sim = await startSim();
    const runId = await startRun(
      sim,
      scripted([
        { type: 'approval', command: 'x' },
        { type: 'approval', command: 'y' },
      ]),
    );
    await waitForStatus(sim, runId, 'waiting_for_approval');
    for (const choice of ['maybe', '', null, true, 1, ['once']]) {
      const answer = await approve(sim, runId, { choice });
      expect(answer.status).toBe(400);
      expect(JSON.parse(answer.text).error.code).toBe('invalid_approval_choice');
    }
    expect((await approve(sim, runId, {})).status).toBe(400);
    const allowed = await approve(sim, runId, { choice: ' Allow\n' });
    expect(JSON.parse(allowed.text).choice).toBe('once');
  });

  it('answers 409 approval_not_pending when nothing waits and 409 approval_not_active once the run ended', async () => {
    const sim = await startSim();
    const runId = await startRun(sim, scripted([{ type: 'sleep', ms: 60_000 }]));
    await waitForStatus(sim, runId, 'running');
    const notPending = await approve(sim, runId, { choice: 'once' });
    expect(notPending.status).toBe(409);
    expect(notPending.text).toBe(
      `{"error": {"message": "Run has no pending approval: ${runId}", "type": "invalid_request_error", "param": null, "code": "approval_not_pending"}}`,
    );
    await call(sim, 'POST', `/v1/runs/${runId}/stop`);
    const notActive = await approve(sim, runId, { choice: 'once' });
    expect(JSON.parse(notActive.text).error.code).toBe('approval_not_active');
  });

  it('checks in order: 404 unknown run, 400 Invalid JSON, plain 500 for non-object JSON', async () => {
    const sim = await startSim();
    expect((await approve(sim, 'run_nope', { choice: 'once' })).status).toBe(404);
    const runId = await startRun(sim, GUARDED);
    const invalid = await approve(sim, runId, '{nope');
    expect(invalid.status).toBe(400);
    expect(invalid.text).toBe('{"error": {"message": "Invalid JSON", "type": "invalid_request_error", "param": null, "code": null}}');
    const array = await approve(sim, runId, '["once"]');
    expect(array.status).toBe(500);
    expect(array.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(array.text.startsWith('500 Internal Server Error')).toBe(true);
  });

  it('denies on timeout and leaves the status at waiting_for_approval (the quirk)', async () => {
    const sim = await startSim({ approvalTimeoutMs: 20 });
    const runId = await startRun(
      sim,
      scripted([
        { type: 'approval', command: 'rm -rf /' },
        { type: 'tool', tool: 'terminal' },
        { type: 'sleep', ms: 60_000 },
      ]),
    );
    await waitFor(() => (sim.run(runId)?.events ?? []).some((event) => event['event'] === 'tool.completed'), 'tool after timeout');
    expect(sim.run(runId)?.status).toBe('waiting_for_approval');
    expect(sim.run(runId)?.pendingApprovals).toBe(0);
    expect(sim.run(runId)?.events.find((event) => event['event'] === 'tool.completed')).toMatchObject({ error: true });
    expect(JSON.parse((await approve(sim, runId, { choice: 'once' })).text).error.code).toBe('approval_not_pending');
  });
});
