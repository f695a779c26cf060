/** Shared by the Herm simulator suites: a simulator per test (closed after it), and small clients for its two routes. */
import { request } from 'undici';
import { afterEach, expect } from 'vitest';
import { startHermSimulator, type HermSimulator, type HermSimulatorOptions } from '../../src/simulator/index.js';

export const KEY = 'herm_key_test_0123456789';
const started: HermSimulator[] = [];
afterEach(() => closeAll());

/** Closes every simulator this file started (they are closed after each test anyway). */
export async function closeAll(): Promise<void> {
  await Promise.all(started.splice(0).map((sim) => sim.close()));
}

export async function start(options: Partial<HermSimulatorOptions> = {}): Promise<HermSimulator> {
  const sim = await startHermSimulator({ apiKey: KEY, ...options });
  started.push(sim);
  return sim;
}

export type Status = 'running' | 'completed' | 'failed';
export type Event = Record<string, unknown> & { id: string; session_id: string };
export interface Posted {
  status: number;
  events: Event[];
  error?: { type: string; message: string; retryable?: boolean };
}

export function result(toolUseId: string, status: Status, text = `${status}: ${toolUseId}`): Record<string, unknown> {
  return { type: 'user.custom_tool_result', tool_use_id: toolUseId, content: [{ type: 'text', text }], status, is_error: status === 'failed' };
}

export async function post(sim: HermSimulator, sessionId: string, events: unknown[]): Promise<Posted> {
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
export function only(posted: Posted): Event {
  expect(posted.status).toBe(202);
  expect(posted.events).toHaveLength(1);
  return posted.events[0] as Event;
}

export interface Frame {
  event: string;
  data: Record<string, unknown>;
}

/** An SSE subscriber of the session stream; `frames()` are the `event:` frames received so far. */
export async function openStream(sim: HermSimulator, sessionId: string) {
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
