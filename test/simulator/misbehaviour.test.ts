import { afterEach, describe, expect, it } from 'vitest';
import { call, closeSims, scripted, startRun, startSim, subscribe, waitFor, waitForStatus } from './support.js';

afterEach(closeSims);

const GUARDED = scripted([
  { type: 'approval', command: 'rm -rf ./scratch', pattern_key: 'recursive delete', description: 'recursive delete' },
  { type: 'tool', tool: 'terminal' },
  { type: 'complete', output: 'ok' },
]);

describe('misbehaviour: approvalsLeakAcrossSession', () => {
  it('resolves the oldest pending approval of the session, not the answered run', async () => {
    const sim = await startSim({ misbehaviour: { approvalsLeakAcrossSession: true } });
    const first = await startRun(sim, { ...GUARDED, session_id: 'shared' });
    const second = await startRun(sim, { ...GUARDED, session_id: 'shared' });
    await waitForStatus(sim, first, 'waiting_for_approval');
    await waitForStatus(sim, second, 'waiting_for_approval');

    const answer = await call(sim, 'POST', `/v1/runs/${second}/approval`, { body: JSON.stringify({ choice: 'once' }) });
    expect(JSON.parse(answer.text)).toEqual({ object: 'hermes.run.approval_response', run_id: second, choice: 'once', resolved: 1 });
    await waitForStatus(sim, first, 'completed');
    expect(sim.run(second)?.pendingApprovals).toBe(1);
    expect(sim.run(second)?.events.map((event) => event['event'])).toEqual(['tool.started', 'approval.request', 'approval.responded']);
  });

  it('keeps runs of different sessions apart', async () => {
    const sim = await startSim({ misbehaviour: { approvalsLeakAcrossSession: true } });
    const first = await startRun(sim, { ...GUARDED, session_id: 'one' });
    const second = await startRun(sim, { ...GUARDED, session_id: 'two' });
    await waitForStatus(sim, first, 'waiting_for_approval');
    await waitForStatus(sim, second, 'waiting_for_approval');
    await call(sim, 'POST', `/v1/runs/${second}/approval`, { body: JSON.stringify({ choice: 'once' }) });
    await waitForStatus(sim, second, 'completed');
    expect(sim.run(first)?.status).toBe('waiting_for_approval');
  });
});

describe('misbehaviour: streamsNeverTerminate', () => {
  it('sends keepalives instead of the terminal event and never closes the stream', async () => {
    const sim = await startSim({ keepaliveMs: 30, misbehaviour: { streamsNeverTerminate: true } });
    const runId = await startRun(
      sim,
      scripted([
        { type: 'delta', text: 'hi' },
        { type: 'complete', output: 'hi' },
      ]),
    );
    const subscriber = await subscribe(sim, runId);
    await waitForStatus(sim, runId, 'completed');
    await waitFor(() => subscriber.text().split(': keepalive').length > 3, 'three keepalives after completion');
    expect(subscriber.text()).toContain('message.delta');
    expect(subscriber.text()).not.toContain('run.completed');
    expect(subscriber.text()).not.toContain(': stream closed');
    expect(sim.run(runId)?.events.at(-1)?.['event']).toBe('run.completed');
    subscriber.close();
  });
});
