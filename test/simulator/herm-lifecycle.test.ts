import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { startHermSimulator, type HermSimulator, type HermSimulatorOptions } from '../../src/simulator/index.js';
import { waitFor } from './support.js';

const KEY = 'herm_key_lifecycle_0123456789';
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

function openNetworkHandles(): string[] {
  return process.getActiveResourcesInfo().filter((kind) => kind.startsWith('TCP'));
}

describe('Herm simulator: lifecycle', () => {
  it('listens on 127.0.0.1 and an ephemeral port by default', async () => {
    const sim = await start();
    expect(sim.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(Number(new URL(sim.url).port)).toBeGreaterThan(0);
  });

  it('fails fast when the port is taken', async () => {
    const sim = await start();
    await expect(startHermSimulator({ apiKey: KEY, port: Number(new URL(sim.url).port) })).rejects.toThrow();
  });

  it('sends a keepalive comment on idle streams', async () => {
    const sim = await start({ keepaliveMs: 10 });
    const stream = await openStream(sim, 'session_1');
    await waitFor(() => stream.text().includes(': ping\n\n'), 'a keepalive');
    expect(stream.frames()).toEqual([]);
    stream.close();
  });

  it('close() ends open streams, cancels pending-call timers and leaves no network handle behind', async () => {
    const sim = await start({ keepaliveMs: 10 });
    const stream = await openStream(sim, 'session_1');
    sim.emitToolUse('session_1', { name: 'render', input: {} });
    only(await post(sim, 'session_1', [result('custom_toolu_x', 'running')]));
    await waitFor(() => stream.frames().length === 2, 'two frames');

    await sim.close();
    expect(['end', 'error']).toContain(await stream.finished);
    await sim.close(); // idempotent
    await expect(post(sim, 'session_1', [result('custom_toolu_y', 'running')])).rejects.toThrow();
    // Every other simulator of this file is closed too, so no TCP handle may stay.
    await Promise.all(started.splice(0).map((other) => other.close()));
    await waitFor(() => openNetworkHandles().length === 0, `no TCP handles (${openNetworkHandles().join(', ')})`);
  });

  it('inspection stays available after close()', async () => {
    const sim = await start();
    const use = sim.emitToolUse('session_1', { name: 'render', input: {} });
    const event = only(await post(sim, 'session_1', [result(use.tool_use_id, 'running')]));
    await sim.close();
    expect(sim.history('session_1')).toEqual([event]);
    expect(sim.toolCall('session_1', use.tool_use_id)?.state).toBe('running');
  });
});
