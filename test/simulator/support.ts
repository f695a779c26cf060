import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { startHermesSimulator } from '../../src/simulator/index.js';
import type { HermesSimulator, HermesSimulatorOptions, RunStep } from '../../src/simulator/index.js';

export const API_KEY = 'hk_example_key_0123456789';
export const AUTH = { authorization: `Bearer ${API_KEY}` };
const CAPTURES = fileURLToPath(new URL('../../fixtures/captures', import.meta.url));

// ---- simulator lifecycle --------------------------------------------------------------

const started: HermesSimulator[] = [];

export async function startSim(options: Partial<HermesSimulatorOptions> = {}): Promise<HermesSimulator> {
  const sim = await startHermesSimulator({ apiKey: API_KEY, ...options });
  started.push(sim);
  return sim;
}

/** For afterEach: closes every simulator started by the test. */
export async function closeSims(): Promise<void> {
  await Promise.all(started.splice(0).map((sim) => sim.close()));
}

// ---- plain requests ----------------------------------------------------------------------

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

export async function call(
  sim: HermesSimulator,
  method: 'GET' | 'POST' | 'OPTIONS' | 'DELETE',
  path: string,
  options: { body?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  // reset: one connection per request, so no pooled socket outlives a restart() or close().
  const answer = await request(`${sim.url}${path}`, {
    method,
    reset: true,
    headers: { ...AUTH, ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}), ...options.headers },
    ...(options.body !== undefined ? { body: options.body } : {}),
  });
  return { status: answer.statusCode, headers: answer.headers, text: await answer.body.text() };
}

export async function startRun(sim: HermesSimulator, body: Record<string, unknown> = { input: 'hi' }, headers: Record<string, string> = {}): Promise<string> {
  const answer = await call(sim, 'POST', '/v1/runs', { body: JSON.stringify(body), headers });
  if (answer.status !== 202) throw new Error(`start answered ${answer.status}: ${answer.text}`);
  return (JSON.parse(answer.text) as { run_id: string }).run_id;
}

export function scripted(steps: RunStep[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { input: 'scripted', sim_script: steps, ...extra };
}

export async function statusOf(sim: HermesSimulator, runId: string): Promise<Record<string, unknown>> {
  const answer = await call(sim, 'GET', `/v1/runs/${runId}`);
  return JSON.parse(answer.text) as Record<string, unknown>;
}

// ---- SSE subscriber ------------------------------------------------------------------------

export interface Subscriber {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Everything received so far. */
  text(): string;
  /** Resolves when the body ended: 'end' (clean) or 'error' (e.g. a cut socket). */
  finished: Promise<'end' | 'error'>;
  waitForText(fragment: string): Promise<void>;
  close(): void;
}

export async function subscribe(sim: HermesSimulator, runId: string): Promise<Subscriber> {
  const answer = await request(`${sim.url}/v1/runs/${runId}/events`, { reset: true, headers: { ...AUTH, accept: 'text/event-stream' } });
  let received = '';
  const decoder = new TextDecoder();
  const body = answer.body;
  const finished = (async (): Promise<'end' | 'error'> => {
    try {
      for await (const chunk of body) received += decoder.decode(chunk as Buffer, { stream: true });
      return 'end';
    } catch {
      return 'error';
    }
  })();
  return {
    status: answer.statusCode,
    headers: answer.headers,
    text: () => received,
    finished,
    waitForText: (fragment) => waitFor(() => received.includes(fragment), `SSE text ${JSON.stringify(fragment)}; got ${JSON.stringify(received)}`),
    close: () => body.destroy(),
  };
}

/** The `data:` payloads of an SSE text, parsed. */
/** The JSON of every `data: ` frame, after the `id: <seq>` line the `later` profile puts first. */
export function dataFrames(text: string): Array<Record<string, unknown>> {
  return text
    .split('\n\n')
    .map((frame) => frame.replace(/^id: \d+\n/, ''))
    .filter((frame) => frame.startsWith('data: '))
    .map((frame) => JSON.parse(frame.slice('data: '.length)) as Record<string, unknown>);
}

// ---- waiting ----------------------------------------------------------------------------------

export async function waitFor(condition: () => boolean | Promise<boolean>, what = 'condition', timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export async function waitForStatus(sim: HermesSimulator, runId: string, status: string): Promise<void> {
  await waitFor(() => sim.run(runId)?.status === status, `status ${status} (now ${sim.run(runId)?.status})`);
}

// ---- raw HTTP (byte-exact) --------------------------------------------------------------------

export interface RawAnswer {
  statusLine: string;
  headers: Array<[string, string]>;
  /** The raw bytes after the header block (still chunk-encoded when chunked). */
  rawBody: string;
  /** The decoded body. */
  body: string;
  header(name: string): string | undefined;
}

/** Writes `requestText` verbatim (it should ask for `Connection: close`) and reads until the server closes. */
export function rawExchange(port: number, requestText: string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(parseRawResponse(Buffer.concat(chunks).toString('latin1'))));
    socket.write(requestText);
  });
}

export function parseRawResponse(raw: string): RawAnswer {
  const split = raw.indexOf('\r\n\r\n');
  const head = split >= 0 ? raw.slice(0, split) : raw;
  const rawBody = split >= 0 ? raw.slice(split + 4) : '';
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers = lines.map((line): [string, string] => {
    const colon = line.indexOf(':');
    return [line.slice(0, colon), line.slice(colon + 1).trim()];
  });
  const header = (name: string): string | undefined => headers.find(([key]) => key.toLowerCase() === name.toLowerCase())?.[1];
  const length = header('content-length');
  let body = rawBody;
  if (header('transfer-encoding') === 'chunked') body = dechunk(rawBody).join('');
  else if (length !== undefined) body = rawBody.slice(0, Number(length));
  return { statusLine, headers, rawBody, body, header };
}

/** The chunks of a chunked body, in order. */
export function dechunk(raw: string): string[] {
  const chunks: string[] = [];
  let rest = raw;
  for (;;) {
    const lineEnd = rest.indexOf('\r\n');
    if (lineEnd < 0) return chunks;
    const size = parseInt(rest.slice(0, lineEnd), 16);
    if (!(size > 0)) return chunks;
    chunks.push(rest.slice(lineEnd + 2, lineEnd + 2 + size));
    rest = rest.slice(lineEnd + 2 + size + 2);
  }
}

// ---- captures ---------------------------------------------------------------------------------

export interface Capture {
  request: string;
  response: RawAnswer;
}

export function readCapture(name: string): Capture {
  const text = readFileSync(`${CAPTURES}/${name}`, 'latin1');
  const responseMarker = text.indexOf('### response');
  const requestText = text.slice(text.indexOf('\n') + 1, responseMarker);
  const responseText = text.slice(text.indexOf('\n', responseMarker) + 1);
  return { request: requestText, response: parseRawResponse(responseText) };
}

/** The capture's request bytes (trailing file newlines dropped), aimed at `runId` when given. */
export function captureRequest(name: string, runId?: string): string {
  const { request: text } = readCapture(name);
  const split = text.indexOf('\r\n\r\n');
  const head = text.slice(0, split);
  const length = /\r\nContent-Length: (\d+)/i.exec(head)?.[1];
  const request = `${head}\r\n\r\n${text.slice(split + 4, split + 4 + Number(length ?? 0))}`;
  return runId === undefined ? request : request.replace(/run_[0-9a-f]{32}/g, runId);
}

/** Run ids and float timestamps vary between runs; replace them with placeholders. */
export function normalize(text: string): string {
  return text.replace(/run_[0-9a-f]{32}/g, 'run_<id>').replace(/"(timestamp|updated_at|created_at)": \d+\.\d+/g, '"$1": <time>');
}
