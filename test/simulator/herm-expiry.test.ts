import { describe, expect, it } from 'vitest';
import { start, result, post, only, openStream } from './herm-support.js';
import { waitFor } from './support.js';

describe('Herm simulator: expired tool calls', () => {
  it('answers 410 response_expired (retryable false) to a running result after expire(), and records nothing', async () => {
    const sim = await start();
    const use = sim.emitToolUse('session_1', { name: 'render', input: {} });
    sim.expire('session_1', use.tool_use_id);
    expect(sim.toolCall('session_1', use.tool_use_id)?.state).toBe('expired');
    for (let attempt = 0; attempt < 2; attempt += 1) {
      const answer = await post(sim, 'session_1', [result(use.tool_use_id, 'running')]);
      expect(answer.status).toBe(410);
      expect(answer.events).toEqual([]);
      expect(answer.error).toEqual({ type: 'response_expired', message: 'the session stopped waiting for this tool result', retryable: false });
    }
    expect(sim.history('session_1')).toEqual([]);
    expect(sim.accepted()).toEqual([]);
    expect(sim.toolCall('session_1', use.tool_use_id)?.state).toBe('expired');
  });

  it('a request with an expired running result is rejected whole', async () => {
    const sim = await start();
    const fresh = sim.emitToolUse('session_1', { name: 'a', input: {} });
    const stale = sim.emitToolUse('session_1', { name: 'b', input: {} });
    sim.expire('session_1', stale.tool_use_id);
    const answer = await post(sim, 'session_1', [result(fresh.tool_use_id, 'running'), result(stale.tool_use_id, 'running')]);
    expect(answer.status).toBe(410);
    expect(sim.toolCall('session_1', fresh.tool_use_id)?.state).toBe('pending');
  });

  it('appends a final result after expiry as a new event, with exactly one continuation', async () => {
    const sim = await start();
    const use = sim.emitToolUse('session_1', { name: 'render', input: {} });
    sim.expire('session_1', use.tool_use_id);
    expect((await post(sim, 'session_1', [result(use.tool_use_id, 'running')])).status).toBe(410);
    const stream = await openStream(sim, 'session_1');

    const done = only(await post(sim, 'session_1', [result(use.tool_use_id, 'completed', 'Render completed.')]));
    expect(sim.history('session_1')).toEqual([done]);
    expect(sim.continuations('session_1', use.tool_use_id)).toBe(1);
    expect(sim.toolCall('session_1', use.tool_use_id)).toEqual({
      session_id: 'session_1',
      tool_use_id: use.tool_use_id,
      state: 'completed',
      final_event_id: done.id,
    });
    await waitFor(() => stream.frames().length === 1, 'the appended event');
    expect(stream.frames()).toEqual([{ event: 'user.custom_tool_result', data: done }]);

    expect(only(await post(sim, 'session_1', [result(use.tool_use_id, 'completed')]))).toEqual(done);
    expect(sim.continuations('session_1', use.tool_use_id)).toBe(1);
  });

  it('expire() on an unknown tool_use_id makes its kickoff answer 410; on a running call it changes nothing', async () => {
    const sim = await start();
    sim.expire('session_1', 'custom_toolu_never_emitted');
    expect((await post(sim, 'session_1', [result('custom_toolu_never_emitted', 'running')])).status).toBe(410);

    const use = sim.emitToolUse('session_1', { name: 'render', input: {} });
    only(await post(sim, 'session_1', [result(use.tool_use_id, 'running')]));
    sim.expire('session_1', use.tool_use_id);
    expect(sim.toolCall('session_1', use.tool_use_id)?.state).toBe('running');
  });

  it('a pending call expires on its own after pendingTimeoutMs', async () => {
    const sim = await start({ pendingTimeoutMs: 20 });
    const use = sim.emitToolUse('session_1', { name: 'render', input: {} });
    await waitFor(() => sim.toolCall('session_1', use.tool_use_id)?.state === 'expired', 'the call to expire');
    expect((await post(sim, 'session_1', [result(use.tool_use_id, 'running')])).status).toBe(410);
  });

  it('a call answered in time does not expire later', async () => {
    const sim = await start({ pendingTimeoutMs: 500 });
    const use = sim.emitToolUse('session_1', { name: 'render', input: {} });
    only(await post(sim, 'session_1', [result(use.tool_use_id, 'running')]));
    const late = sim.emitToolUse('session_1', { name: 'marker', input: {} });
    await waitFor(() => sim.toolCall('session_1', late.tool_use_id)?.state === 'expired', 'a later call to expire');
    expect(sim.toolCall('session_1', use.tool_use_id)?.state).toBe('running');
  });
});
