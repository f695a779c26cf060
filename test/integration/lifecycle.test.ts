import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import type { AipActionResult, RunEventsOutput } from 'aip-connector-hermes-agent';
import { eventually, grantFor, nextId, script, startHarness, type Harness } from '../helpers/harness.js';

let h: Harness;
beforeEach(async () => {
  h = await startHarness({ simulator: { stepDelayMs: 5 } });
});
afterEach(async () => {
  await h.close();
});

const statusOf = async (runId: string) => {
  const result = await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: runId } });
  expect(result.status).toBe('completed');
  return result.output as { status: string; output?: string; last_event?: string };
};

const approve = (runId: string, extra: Record<string, unknown> = {}) => {
  const input = { run_id: runId, choice: 'once', ...extra };
  return h.invoke({ capability_id: h.cap('run_approval'), input, idempotency_key: nextId('key') }, { approval: grantFor(input) });
};

describe('full lifecycle over loopback', () => {
  test('start → events with an approval → approval with a grant → completion', async () => {
    const runId = await h.startRun({ input: 'clean the scratch folder', session_id: 'demo-session', sim_script: script.approval() });
    let approval: Promise<AipActionResult> | undefined;
    const events = await h.invoke(
      { capability_id: h.cap('run_events'), input: { run_id: runId } },
      { onChunk: (chunk) => void (chunk.kind === 'pending_approval' && (approval = approve(runId))) },
    );

    expect(approval).toBeDefined();
    const answered = await approval!;
    expect(answered.status).toBe('completed');
    expect(answered.output).toEqual({ object: 'hermes.run.approval_response', run_id: runId, choice: 'once', resolved: 1 });

    expect(events.status).toBe('completed');
    expect(events.error).toBeUndefined();
    const output = events.output as RunEventsOutput;
    expect(output.terminal).toBe(true);
    expect(output.terminal_event).toBe('run.completed');
    expect(output.http_status).toBe(200);
    // Hermes starts the text after a tool iteration with a paragraph break, in the stream only.
    expect(output.text).toBe('Checking \n\ndone');
    expect(output.events.map((event) => event.event)).toEqual([
      'message.delta',
      'reasoning.available',
      'tool.started',
      'approval.request',
      'approval.responded',
      'tool.completed',
      'message.delta',
      'reasoning.available',
      'run.completed',
    ]);
    expect(output.events[3]?.data).toMatchObject({ command: 'rm -rf ./scratch', choices: ['once', 'session', 'always', 'deny'], run_id: runId });

    const chunks = h.chunks.get(events.action_id) ?? [];
    expect(chunks.map((chunk) => chunk.kind)).toEqual(['data', 'thought', 'tool', 'pending_approval', 'data', 'tool', 'data', 'thought', 'done']);
    expect(chunks[0]?.part).toEqual({ type: 'text', text: 'Checking ' });
    expect(chunks[8]?.data).toEqual({ hermes_sse: output.events[8] });

    const status = await statusOf(runId);
    expect(status).toMatchObject({ status: 'completed', output: 'Removed.', last_event: 'run.completed' });
  });

  test('start → stop → cancelled', async () => {
    const runId = await h.startRun({ input: 'long job', sim_script: script.long() });
    await eventually(async () => (await statusOf(runId)).status === 'running' || undefined, 'run is running');

    const stopInput = { run_id: runId };
    const stop = await h.invoke({ capability_id: h.cap('run_stop'), input: stopInput, idempotency_key: nextId('key') }, { approval: grantFor(stopInput) });
    expect(stop.status).toBe('completed');
    expect(stop.output).toEqual({ run_id: runId, status: 'stopping' });
    expect(stop.receipt).toMatchObject({ operation: 'run_stop', http_status: 200 });

    const events = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } });
    expect(events.status).toBe('cancelled');
    expect(events.error).toBeUndefined();
    const output = events.output as RunEventsOutput;
    expect(output.terminal_event).toBe('run.cancelled');
    expect(h.chunks.get(events.action_id)?.at(-1)?.kind).toBe('done');
    expect((await statusOf(runId)).status).toBe('cancelled');
  });

  test('a stream cut mid-run is reported as incomplete and reconciled through status, never as completed', async () => {
    const runId = await h.startRun({
      input: 'cut me',
      sim_script: [
        { type: 'delta', text: 'before cut' },
        { type: 'sleep', ms: 50 },
        { type: 'cut' },
        { type: 'delta', text: 'lost' },
        { type: 'complete', output: 'done' },
      ],
    });
    const events = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } });

    expect(events.status).toBe('failed');
    expect(events.error).toMatchObject({ code: 'connector.hermes_agent.stream_incomplete', category: 'connector', retryable: false });
    const output = events.output as RunEventsOutput;
    expect(output.terminal).toBe(false);
    expect(output.events.map((event) => event.event)).toEqual(['message.delta']);
    expect(output.text).toBe('before cut');
    expect(output.reconciliation?.http_status).toBe(200);
    expect(output.reconciliation?.status).toMatchObject({ object: 'hermes.run', run_id: runId });
    expect(h.chunks.get(events.action_id)?.at(-1)).toMatchObject({ kind: 'error', data: { code: 'connector.hermes_agent.stream_incomplete' } });

    // No replay: the stream is gone from Hermes once its subscriber left.
    const again = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } });
    expect(again.error?.code).toBe('connector.hermes_agent.not_found');
  });

  test('two runs sharing one session_id keep isolated approval queues', async () => {
    const body = (label: string) => ({ input: `job ${label}`, session_id: 'shared-session', sim_script: script.approval(`rm -rf ./${label}`) });
    const first = await h.startRun(body('a'));
    const second = await h.startRun(body('b'));
    for (const runId of [first, second]) {
      await eventually(async () => (await statusOf(runId)).status === 'waiting_for_approval' || undefined, `${runId} waits for approval`);
    }

    const answered = await approve(first, { resolve_all: true });
    expect(answered.output).toMatchObject({ run_id: first, resolved: 1 });
    await eventually(async () => (await statusOf(first)).status === 'completed' || undefined, 'first run completes');

    expect(h.sim.run(second)?.pendingApprovals).toBe(1);
    expect((await statusOf(second)).status).toBe('waiting_for_approval');

    const other = await approve(second);
    expect(other.output).toMatchObject({ run_id: second, resolved: 1 });
    await eventually(async () => (await statusOf(second)).status === 'completed' || undefined, 'second run completes');
  });
});
