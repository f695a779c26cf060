import { describe, expect, it } from 'vitest';
import { applyToolUpdate } from '../../src/bridge/tool-update.js';

const running = {
  id: 'evt_running',
  type: 'user.custom_tool_result',
  tool_use_id: 'toolu_1',
  status: 'running',
  is_error: false,
  content: [{ type: 'text', text: 'Started.' }],
  ui_row: 7,
};
const history: Array<Record<string, unknown>> = [{ id: 'evt_user', type: 'user.message' }, running, { id: 'evt_agent', type: 'agent.message' }];
/** The replacing event as Herm sends it: its own id, and no `ui_row` (a field only the client's copy has). */
const completed = {
  id: 'evt_final',
  type: 'user.custom_tool_result',
  tool_use_id: 'toolu_1',
  status: 'completed',
  is_error: false,
  content: [{ type: 'text', text: 'Done.' }],
};
const update = (eventId: string, payload: unknown = completed) => ({
  type: 'session.tool_updated',
  payload: { type: 'session.tool_updated', tool_use_id: 'toolu_1', event_id: eventId, payload },
});
/** `running` patched with `completed`: the running event's id and position, the completion's fields, the fields it lacks kept. */
const patchedRow = { ...running, ...completed, id: 'evt_running' };

describe('applyToolUpdate', () => {
  it('patches the event named by payload.event_id with payload.payload: same id and position, new fields, missing fields kept', () => {
    const patched = applyToolUpdate(history, update('evt_running'));
    expect(patched).toEqual([history[0], patchedRow, history[2]]);
    expect(patched[1]?.id).toBe('evt_running');
    expect(patched[1]?.ui_row).toBe(7);
  });

  it('a second patch still finds the event by its id (a UI keyed by id keeps its row)', () => {
    const failed = { ...completed, status: 'failed', is_error: true, content: [{ type: 'text', text: 'Failed after all.' }] };
    const twice = applyToolUpdate(applyToolUpdate(history, update('evt_running')), update('evt_running', failed));
    expect(twice).toEqual([history[0], { ...running, ...failed, id: 'evt_running' }, history[2]]);
  });

  it('accepts the updated event a 202 returns as it comes (a user.custom_tool_result with its id): patches the running result of its tool_use_id', () => {
    expect(applyToolUpdate(history, completed)).toEqual([history[0], patchedRow, history[2]]);
  });

  it('the 202 event after the stream patch (or before it) gives the same history', () => {
    const streamFirst = applyToolUpdate(applyToolUpdate(history, update('evt_running')), completed);
    const responseFirst = applyToolUpdate(applyToolUpdate(history, completed), update('evt_running'));
    expect(streamFirst).toEqual([history[0], patchedRow, history[2]]);
    expect(responseFirst).toEqual(streamFirst);
  });

  it('a 202 event whose id is already in the history patches that event, before any other result of its tool_use_id', () => {
    const appended = [{ id: 'evt_user', type: 'user.message' }, running, { ...completed, content: [{ type: 'text', text: 'old' }] }];
    expect(applyToolUpdate(appended, completed)).toEqual([appended[0], running, completed]);
  });

  it('is pure: neither the history nor the update is modified, and the patched event is a new object', () => {
    const before = structuredClone(history);
    const change = update('evt_running');
    const changeBefore = structuredClone(change);
    const patched = applyToolUpdate(history, change);
    applyToolUpdate(history, completed);
    expect(history).toEqual(before);
    expect(change).toEqual(changeBefore);
    expect(completed.id).toBe('evt_final');
    expect(patched).not.toBe(history);
    expect(patched[1]).not.toBe(running);
    expect(patched[1]).not.toBe(completed);
  });

  it('ignores unknown event ids and tool_use_ids, other event types and malformed updates', () => {
    expect(applyToolUpdate(history, update('evt_missing'))).toEqual(history);
    expect(applyToolUpdate(history, { ...completed, id: 'evt_other', tool_use_id: 'toolu_other' })).toEqual(history);
    expect(applyToolUpdate(history, { type: 'agent.message', payload: { event_id: 'evt_running', payload: completed } })).toEqual(history);
    const { id: _id, ...withoutId } = completed;
    for (const malformed of [
      null,
      undefined,
      42,
      'x',
      {},
      { type: 'session.tool_updated' },
      update('evt_running', null),
      update('evt_running', 'text'),
      update('evt_running', [1]),
      withoutId,
    ]) {
      expect(applyToolUpdate(history, malformed)).toEqual(history);
    }
  });

  it('applies the same update twice with the same result (idempotent)', () => {
    const once = applyToolUpdate(history, update('evt_running'));
    expect(applyToolUpdate(once, update('evt_running'))).toEqual(once);
  });
});
