import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { startHermSimulator, type HermSimulator, type HermSimulatorOptions } from '../../src/simulator/index.js';
import { waitFor } from './support.js';

const KEY = 'herm_key_idempotency_0123456789';
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
