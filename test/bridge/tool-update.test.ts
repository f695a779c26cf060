import { describe, expect, it } from 'vitest';
import { applyToolUpdate } from '../../src/bridge/tool-update.js';

const running = { id: 'evt_running', type: 'user.custom_tool_result', tool_use_id: 'toolu_1', status: 'running', content: [{ type: 'text', text: 'Started.' }] };
const history = [{ id: 'evt_user', type: 'user.message' }, running, { id: 'evt_agent', type: 'agent.message' }];
const completed = { id: 'evt_final', type: 'user.custom_tool_result', tool_use_id: 'toolu_1', status: 'completed', is_error: false, content: [{ type: 'text', text: 'Done.' }] };
const update = (eventId: string, payload: unknown = completed) => ({ type: 'session.tool_updated', payload: { type: 'session.tool_updated', tool_use_id: 'toolu_1', event_id: eventId, payload } });

describe('applyToolUpdate', () => {
  it('replaces the event named by payload.event_id with payload.payload, in place', () => {
    const patched = applyToolUpdate(history, update('evt_running'));
    expect(patched).toEqual([history[0], completed, history[2]]);
  });

  it('is pure: the history it was given is unchanged, and the replacement is a copy', () => {
    const before = structuredClone(history);
    const patched = applyToolUpdate(history, update('evt_running'));
    expect(history).toEqual(before);
    expect(patched).not.toBe(history);
    expect(patched[1]).not.toBe(completed);
  });

  it('ignores unknown event ids, other event types and malformed updates', () => {
    expect(applyToolUpdate(history, update('evt_missing'))).toEqual(history);
    expect(applyToolUpdate(history, { type: 'agent.message', payload: { event_id: 'evt_running', payload: completed } })).toEqual(history);
    for (const malformed of [null, undefined, 42, 'x', {}, { type: 'session.tool_updated' }, update('evt_running', null), update('evt_running', 'text')]) {
      expect(applyToolUpdate(history, malformed)).toEqual(history);
    }
  });

  it('applies the same update twice with the same result (idempotent)', () => {
    const once = applyToolUpdate(history, update('evt_running'));
    expect(applyToolUpdate(once, update('evt_running'))).toEqual(once);
  });
});
