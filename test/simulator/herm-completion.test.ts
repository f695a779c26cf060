import { describe, expect, it } from 'vitest';
import { start, result, post, only, openStream } from './herm-support.js';
import { waitFor } from './support.js';

describe('Herm simulator: a final result replaces its running result', () => {
  it('replaces the running result in place, answers 202 with the updated event and counts one continuation', async () => {
    const sim = await start();
    const before = sim.emitToolUse('session_1', { name: 'quick', input: {} });
    const use = sim.emitToolUse('session_1', { name: 'render', input: {} });
    const after = sim.emitToolUse('session_1', { name: 'other', input: {} });
    const first = only(await post(sim, 'session_1', [result(before.tool_use_id, 'completed')]));
    const running = only(await post(sim, 'session_1', [result(use.tool_use_id, 'running', 'Render job started.')]));
    const third = only(await post(sim, 'session_1', [result(after.tool_use_id, 'running')]));

    const done = only(await post(sim, 'session_1', [result(use.tool_use_id, 'completed', 'Render completed.')]));
    expect(done).toEqual({ ...result(use.tool_use_id, 'completed', 'Render completed.'), id: done.id, session_id: 'session_1' });
    expect(done.id).not.toBe(running.id);
    expect(sim.history('session_1')).toEqual([first, done, third]);
    expect(sim.accepted('session_1')).toEqual([first, running, third, done]);
    expect(sim.continuations('session_1', use.tool_use_id)).toBe(1);
    expect(sim.toolCall('session_1', use.tool_use_id)).toEqual({
      session_id: 'session_1',
      tool_use_id: use.tool_use_id,
      state: 'completed',
      running_event_id: running.id,
      final_event_id: done.id,
    });
  });

  it('sends the ephemeral session.tool_updated naming the running result, and does not append the replacement', async () => {
    const sim = await start();
    const use = sim.emitToolUse('session_1', { name: 'render', input: {}, tool_use_id: 'custom_toolu_123' });
    const running = only(await post(sim, 'session_1', [result(use.tool_use_id, 'running')]));
    const stream = await openStream(sim, 'session_1');

    const failed = only(await post(sim, 'session_1', [result(use.tool_use_id, 'failed', 'Render failed: out of memory.')]));
    expect(failed.is_error).toBe(true);
    await waitFor(() => stream.frames().length === 1, 'the update frame');
    expect(stream.frames()).toEqual([
      {
        event: 'session.tool_updated',
        data: {
          type: 'session.tool_updated',
          session_id: 'session_1',
          payload: { type: 'session.tool_updated', tool_use_id: 'custom_toolu_123', event_id: running.id, payload: failed },
        },
      },
    ]);
    // Patching the running event with payload.payload gives the history.
    expect(sim.history('session_1')).toEqual([failed]);
    expect(sim.toolCall('session_1', use.tool_use_id)?.state).toBe('failed');
    expect(sim.continuations('session_1', use.tool_use_id)).toBe(1);
  });
});
