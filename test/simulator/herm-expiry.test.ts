import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { startHermSimulator, type HermSimulator, type HermSimulatorOptions } from '../../src/simulator/index.js';
import { waitFor } from './support.js';

const KEY = 'herm_key_expiry_0123456789';
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
    expect(sim.toolCall('session_1', use.tool_use_id)).toEqual({ session_id: 'session_1', tool_use_id: use.tool_use_id, state: 'completed', final_event_id: done.id });
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
