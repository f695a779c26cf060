import { describe, expect, it } from 'vitest';
import { start, result, post, only, openStream } from './herm-support.js';
import { waitFor } from './support.js';

describe('Herm simulator: final results are idempotent by session and tool_use_id', () => {
  it('a repeated final result after a running one returns the existing event and starts no second turn', async () => {
    const sim = await start();
    const use = sim.emitToolUse('session_1', { name: 'render', input: {} });
    only(await post(sim, 'session_1', [result(use.tool_use_id, 'running')]));
    const stream = await openStream(sim, 'session_1');
    const done = only(await post(sim, 'session_1', [result(use.tool_use_id, 'completed', 'Render completed.')]));
    const again = only(await post(sim, 'session_1', [result(use.tool_use_id, 'completed', 'Render completed.')]));
    const different = only(await post(sim, 'session_1', [result(use.tool_use_id, 'failed', 'a later, different outcome')]));
    expect(again).toEqual(done);
    expect(different).toEqual(done);
    expect(sim.continuations('session_1', use.tool_use_id)).toBe(1);
    expect(sim.accepted('session_1')).toHaveLength(2);
    expect(sim.history('session_1')).toEqual([done]);
    // One more event on the stream after the retries, to show they sent nothing.
    sim.emitToolUse('session_1', { name: 'marker', input: {} });
    await waitFor(() => stream.frames().length === 2, 'the marker');
    expect(stream.frames().map((frame) => frame.event)).toEqual(['session.tool_updated', 'agent.custom_tool_use']);
  });

  it('a repeated appended final result (no running result) is not appended again', async () => {
    const sim = await start();
    const first = only(await post(sim, 'session_1', [result('custom_toolu_unknown', 'completed')]));
    const again = only(await post(sim, 'session_1', [result('custom_toolu_unknown', 'completed')]));
    expect(again).toEqual(first);
    expect(sim.history('session_1')).toEqual([first]);
    expect(sim.continuations('session_1', 'custom_toolu_unknown')).toBe(1);
  });

  it('a repeated immediate result returns the existing event', async () => {
    const sim = await start();
    const use = sim.emitToolUse('session_1', { name: 'lookup', input: {} });
    const first = only(await post(sim, 'session_1', [result(use.tool_use_id, 'failed')]));
    expect(only(await post(sim, 'session_1', [result(use.tool_use_id, 'failed')]))).toEqual(first);
    expect(sim.continuations('session_1', use.tool_use_id)).toBe(0);
    expect(sim.accepted()).toHaveLength(1);
  });

  it('the same tool_use_id in another session is another call', async () => {
    const sim = await start();
    const a = only(await post(sim, 'session_a', [result('custom_toolu_1', 'completed')]));
    const b = only(await post(sim, 'session_b', [result('custom_toolu_1', 'completed')]));
    expect(b.id).not.toBe(a.id);
    expect(sim.continuations('session_a', 'custom_toolu_1')).toBe(1);
    expect(sim.continuations('session_b', 'custom_toolu_1')).toBe(1);
  });
});
