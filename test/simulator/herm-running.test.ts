import { describe, expect, it } from 'vitest';
import { start, result, post, only, openStream } from './herm-support.js';
import { waitFor } from './support.js';

describe('Herm simulator: running results', () => {
  it('accepts a running result for a pending call: 202 with the event, a new id and the session id', async () => {
    const sim = await start();
    const use = sim.emitToolUse('session_1', { name: 'render', input: { scene: 3 } });
    expect(use).toMatchObject({ type: 'agent.custom_tool_use', name: 'render', input: { scene: 3 } });
    expect(use.id).toMatch(/^sevt_[0-9a-f]+$/);
    expect(use.tool_use_id).toMatch(/^custom_toolu_[0-9a-f]+$/);
    expect(sim.toolCall('session_1', use.tool_use_id)).toEqual({ session_id: 'session_1', tool_use_id: use.tool_use_id, state: 'pending' });

    const event = only(await post(sim, 'session_1', [result(use.tool_use_id, 'running', 'Render job started.')]));
    expect(event).toEqual({ ...result(use.tool_use_id, 'running', 'Render job started.'), id: event.id, session_id: 'session_1' });
    expect(event.id).toMatch(/^evt_[0-9a-f]{24}$/);
    expect(sim.toolCall('session_1', use.tool_use_id)).toEqual({
      session_id: 'session_1',
      tool_use_id: use.tool_use_id,
      state: 'running',
      running_event_id: event.id,
    });
    expect(sim.history('session_1')).toEqual([event]);
    expect(sim.accepted()).toEqual([event]);
    expect(sim.continuations('session_1', use.tool_use_id)).toBe(0);
  });

  it('returns the accepted running result when the kickoff is posted again', async () => {
    const sim = await start();
    const use = sim.emitToolUse('session_1', { name: 'render', input: {}, tool_use_id: 'custom_toolu_k' });
    const first = only(await post(sim, 'session_1', [result(use.tool_use_id, 'running', 'started')]));
    const again = only(await post(sim, 'session_1', [result(use.tool_use_id, 'running', 'started (retry)')]));
    expect(again).toEqual(first);
    expect(sim.accepted()).toHaveLength(1);
  });

  it('treats a tool_use_id it never saw as a call that was still pending', async () => {
    const sim = await start();
    only(await post(sim, 'session_2', [result('custom_toolu_handmade', 'running')]));
    expect(sim.toolCall('session_2', 'custom_toolu_handmade')?.state).toBe('running');
  });

  it('an immediate final result resolves the pending call without starting a new turn', async () => {
    const sim = await start();
    const use = sim.emitToolUse('session_1', { name: 'lookup', input: {} });
    const event = only(await post(sim, 'session_1', [result(use.tool_use_id, 'completed', 'found it')]));
    expect(sim.toolCall('session_1', use.tool_use_id)).toMatchObject({ state: 'completed', final_event_id: event.id });
    expect(sim.continuations('session_1', use.tool_use_id)).toBe(0);
    expect(sim.history('session_1')).toEqual([event]);
  });

  it('answers 409 to a running result after the final one', async () => {
    const sim = await start();
    const use = sim.emitToolUse('session_1', { name: 'lookup', input: {} });
    only(await post(sim, 'session_1', [result(use.tool_use_id, 'failed', 'nope')]));
    const late = await post(sim, 'session_1', [result(use.tool_use_id, 'running')]);
    expect(late.status).toBe(409);
    expect(late.error?.type).toBe('invalid_request_error');
    expect(sim.accepted()).toHaveLength(1);
  });

  it('accepts several events in one request, for different calls', async () => {
    const sim = await start();
    const a = sim.emitToolUse('session_1', { name: 'a', input: {} });
    const b = sim.emitToolUse('session_1', { name: 'b', input: {} });
    const answer = await post(sim, 'session_1', [result(a.tool_use_id, 'running'), result(b.tool_use_id, 'completed')]);
    expect(answer.status).toBe(202);
    expect(answer.events.map((event) => event['tool_use_id'])).toEqual([a.tool_use_id, b.tool_use_id]);
    expect(sim.history('session_1')).toEqual(answer.events);
  });

  it('keeps sessions apart', async () => {
    const sim = await start();
    sim.emitToolUse('session_a', { name: 'render', input: {}, tool_use_id: 'custom_toolu_same' });
    sim.expire('session_a', 'custom_toolu_same');
    const other = only(await post(sim, 'session_b', [result('custom_toolu_same', 'running')]));
    expect(other.session_id).toBe('session_b');
    expect(sim.history('session_a')).toEqual([]);
    expect(sim.accepted('session_b')).toEqual([other]);
    expect(sim.accepted('session_a')).toEqual([]);
  });

  it('streams tool uses (a redelivery too) and appended results to the subscribers of that session only', async () => {
    const sim = await start();
    const stream = await openStream(sim, 'session_1');
    const elsewhere = await openStream(sim, 'session_other');
    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toBe('text/event-stream');
    expect(sim.subscribers('session_1')).toBe(1);

    const use = sim.emitToolUse('session_1', { name: 'render', input: { scene: 1 }, tool_use_id: 'custom_toolu_s' });
    const redelivered = sim.emitToolUse('session_1', { name: 'render', input: { scene: 1 }, tool_use_id: 'custom_toolu_s' });
    expect(redelivered).toEqual(use);
    const accepted = only(await post(sim, 'session_1', [result(use.tool_use_id, 'running')]));
    await waitFor(() => stream.frames().length === 3, 'three frames');
    expect(stream.frames()).toEqual([
      { event: 'agent.custom_tool_use', data: use },
      { event: 'agent.custom_tool_use', data: use },
      { event: 'user.custom_tool_result', data: accepted },
    ]);
    expect(sim.toolCall('session_1', use.tool_use_id)?.state).toBe('running');
    expect(elsewhere.frames()).toEqual([]);
    stream.close();
    elsewhere.close();
    await waitFor(() => sim.subscribers('session_1') === 0 && sim.subscribers('session_other') === 0, 'the subscribers to go');
  });
});
