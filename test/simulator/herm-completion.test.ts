import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { startHermSimulator, type HermSimulator, type HermSimulatorOptions } from '../../src/simulator/index.js';
import { waitFor } from './support.js';

const KEY = 'herm_key_completion_0123456789';
const started: HermSimulator[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((sim) => sim.close()));
});

async function start(options: Partial<HermSimulatorOptions> = {}): Promise<HermSimulator> {
  const sim = await startHermSimulator({ apiKey: KEY, ...options });
  started.push(sim);
  return sim;
}

type Status = 'running' | 'completed' | 'failed';
type Event = Record<string, unknown> & { id: string; session_id: string };
interface Posted {
  status: number;
  events: Event[];
  error?: { type: string; message: string; retryable?: boolean };
}

function result(toolUseId: string, status: Status, text = `${status}: ${toolUseId}`): Record<string, unknown> {
  return { type: 'user.custom_tool_result', tool_use_id: toolUseId, content: [{ type: 'text', text }], status, is_error: status === 'failed' };
}

async function post(sim: HermSimulator, sessionId: string, events: unknown[]): Promise<Posted> {
  const res = await request(`${sim.url}/v1/sessions/${sessionId}/events`, {
    method: 'POST',
    reset: true,
    headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
    body: JSON.stringify({ events }),
  });
  const json = (await res.body.json()) as { events?: Event[]; error?: Posted['error'] };
  return { status: res.statusCode, events: json.events ?? [], ...(json.error ? { error: json.error } : {}) };
}

/** The single event of a 202 answer. */
function only(posted: Posted): Event {
  expect(posted.status).toBe(202);
  expect(posted.events).toHaveLength(1);
  return posted.events[0] as Event;
}

interface Frame {
  event: string;
  data: Record<string, unknown>;
}

/** An SSE subscriber of the session stream; `frames()` are the `event:` frames received so far. */
async function openStream(sim: HermSimulator, sessionId: string) {
  const res = await request(`${sim.url}/v1/sessions/${sessionId}/stream`, { reset: true, headers: { 'x-api-key': KEY } });
  let text = '';
  const body = res.body;
  const finished = (async (): Promise<'end' | 'error'> => {
    try {
      for await (const chunk of body) text += (chunk as Buffer).toString('utf8');
      return 'end';
    } catch {
      return 'error';
    }
  })();
  const frames = (): Frame[] =>
    text
      .split('\n\n')
      .filter((frame) => frame.startsWith('event: '))
      .map((frame) => {
        const [eventLine = '', dataLine = ''] = frame.split('\n');
        return { event: eventLine.slice('event: '.length), data: JSON.parse(dataLine.slice('data: '.length)) as Record<string, unknown> };
      });
  return { status: res.statusCode, headers: res.headers, text: () => text, frames, finished, close: () => body.destroy() };
}

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
