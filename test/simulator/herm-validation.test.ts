import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import type { HermSimulator } from '../../src/simulator/index.js';
import { KEY, start, type Event, type Posted, result, post, only } from './herm-support.js';

async function postRaw(sim: HermSimulator, sessionId: string, body: string | Buffer): Promise<Posted> {
  const res = await request(`${sim.url}/v1/sessions/${sessionId}/events`, {
    method: 'POST',
    reset: true,
    headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
    body,
  });
  const json = (await res.body.json()) as { events?: Event[]; error?: Posted['error'] };
  return { status: res.statusCode, events: json.events ?? [], ...(json.error ? { error: json.error } : {}) };
}

const good = result('custom_toolu_1', 'running');
const without = (field: string): Record<string, unknown> => Object.fromEntries(Object.entries(good).filter(([name]) => name !== field));

const BAD_BODIES: Array<[string, string | Buffer, RegExp]> = [
  ['bad JSON', '{"events": [', /not valid JSON/],
  ['invalid UTF-8', Buffer.concat([Buffer.from('{"events": "'), Buffer.from([0xff]), Buffer.from('"}')]), /not valid JSON/],
  ['an array body', '[]', /"events" array/],
  ['no events', '{}', /"events" array/],
  ['events not an array', '{"events": {}}', /"events" array/],
  ['empty events', '{"events": []}', /must not be empty/],
  ['an event that is not an object', '{"events": [1]}', /events\[0\] must be an object/],
];

const BAD_EVENTS: Array<[string, unknown, RegExp]> = [
  ['unknown type', { ...good, type: 'user.message' }, /unknown event type "user.message"/],
  ['missing type', without('type'), /type is required/],
  ['missing tool_use_id', without('tool_use_id'), /tool_use_id must be a non-empty string/],
  ['empty tool_use_id', { ...good, tool_use_id: '' }, /tool_use_id must be a non-empty string/],
  ['missing content', without('content'), /content must be an array/],
  ['content as a string', { ...good, content: 'done' }, /content must be an array/],
  ['a non-text block', { ...good, content: [{ type: 'image', source: {} }] }, /content\[0\]/],
  ['a text block without text', { ...good, content: [{ type: 'text' }] }, /content\[0\]/],
  ['missing status', without('status'), /status is required/],
  ['unknown status', { ...good, status: 'done' }, /unknown status "done"/],
  ['missing is_error', without('is_error'), /is_error must be a boolean/],
  ['is_error as a string', { ...good, is_error: 'false' }, /is_error must be a boolean/],
];

describe('Herm simulator: request validation', () => {
  it.each(BAD_BODIES)('answers 400 to %s', async (_name, body, message) => {
    const sim = await start();
    const answer = await postRaw(sim, 'session_1', body);
    expect(answer.status).toBe(400);
    expect(answer.error?.type).toBe('invalid_request_error');
    expect(answer.error?.message).toMatch(message);
    expect(sim.accepted()).toEqual([]);
  });

  it.each(BAD_EVENTS)('answers 400 to an event with %s', async (_name, event, message) => {
    const sim = await start();
    sim.emitToolUse('session_1', { name: 'render', input: {}, tool_use_id: 'custom_toolu_1' });
    const answer = await post(sim, 'session_1', [event]);
    expect(answer.status).toBe(400);
    expect(answer.error?.type).toBe('invalid_request_error');
    expect(answer.error?.message).toMatch(message);
    expect(sim.accepted()).toEqual([]);
    expect(sim.toolCall('session_1', 'custom_toolu_1')?.state).toBe('pending');
  });

  it('rejects the whole request when one event is bad, or the same tool_use_id appears twice', async () => {
    const sim = await start();
    const partly = await post(sim, 'session_1', [result('custom_toolu_2', 'running'), { ...good, status: 'queued' }]);
    expect(partly.status).toBe(400);
    expect(partly.error?.message).toMatch(/^events\[1\]\.status/);
    const twice = await post(sim, 'session_1', [result('custom_toolu_2', 'running'), result('custom_toolu_2', 'completed')]);
    expect(twice.status).toBe(400);
    expect(twice.error?.message).toMatch(/twice/);
    expect(sim.accepted()).toEqual([]);
  });

  it('drops unknown fields and accepts empty content and failed without is_error true', async () => {
    const sim = await start();
    const event = only(await post(sim, 'session_1', [{ ...result('custom_toolu_3', 'failed'), is_error: false, content: [], extra: 1, id: 'evt_mine' }]));
    expect(event).toEqual({
      type: 'user.custom_tool_result',
      tool_use_id: 'custom_toolu_3',
      content: [],
      status: 'failed',
      is_error: false,
      id: event.id,
      session_id: 'session_1',
    });
    expect(event.id).not.toBe('evt_mine');
  });

  it('answers 413 to a body over 1 MB', async () => {
    const sim = await start();
    const answer = await post(sim, 'session_1', [result('custom_toolu_4', 'running', 'x'.repeat(1_100_000))]);
    expect(answer.status).toBe(413);
    expect(sim.accepted()).toEqual([]);
  });
});
