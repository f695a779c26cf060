import { afterEach, describe, expect, it } from 'vitest';
import { HERMES_SECURITY_HEADERS } from '../helpers/hermes-headers.js';
import {
  captureRequest,
  closeSims,
  dechunk,
  normalize,
  rawExchange,
  readCapture,
  scripted,
  startRun,
  startSim,
  subscribe,
  waitForStatus,
  type RawAnswer,
} from './support.js';

afterEach(closeSims);

/** Header names and values the simulator must send like the capture (Date, Connection and framing vary). */
function comparableHeaders(answer: RawAnswer): Array<[string, string]> {
  const varying = new Set(['date', 'connection', 'keep-alive']);
  return answer.headers.filter(([name]) => !varying.has(name.toLowerCase()));
}

async function replay(name: string, port: number, runId?: string): Promise<{ ours: RawAnswer; capture: RawAnswer }> {
  const ours = await rawExchange(port, captureRequest(name, runId));
  return { ours, capture: readCapture(name).response };
}

function expectSameAnswer(ours: RawAnswer, capture: RawAnswer, runId?: string): void {
  const expectedBody = runId === undefined ? capture.body : capture.body.replace(/run_[0-9a-f]{32}/g, runId);
  expect(ours.statusLine).toBe(capture.statusLine);
  expect(ours.body).toBe(expectedBody);
  expect(comparableHeaders(ours)).toEqual(comparableHeaders(capture));
}

describe('answers match the captured bytes', () => {
  it('202 start, with the session key echoed', async () => {
    const sim = await startSim();
    const { ours, capture } = await replay('01-start-202.http', sim.port);
    const runId = sim.runs()[0]?.run_id ?? '';
    expect(runId).toMatch(/^run_[0-9a-f]{32}$/);
    expectSameAnswer(ours, capture, runId);
  });

  it('404 unknown run', async () => {
    const sim = await startSim();
    const { ours, capture } = await replay('10-status-404.http', sim.port);
    expectSameAnswer(ours, capture);
  });

  it('401 wrong key (no param key)', async () => {
    const sim = await startSim();
    const { ours, capture } = await replay('11-auth-401.http', sim.port);
    expectSameAnswer(ours, capture);
  });

  it('400 missing input', async () => {
    const sim = await startSim();
    const { ours, capture } = await replay('12-start-400-missing-input.http', sim.port);
    expectSameAnswer(ours, capture);
    expect(sim.startCount()).toBe(0);
  });

  it('status while waiting for approval, approval 200, status completed', async () => {
    const sim = await startSim();
    const runId = await startRun(sim, { input: 'run rm -rf ./build', session_id: 'demo-session' });
    await waitForStatus(sim, runId, 'waiting_for_approval');

    const waiting = await replay('03-status-waiting.http', sim.port, runId);
    expect(normalize(waiting.ours.body)).toBe(normalize(waiting.capture.body));
    expect(comparableHeaders(waiting.ours).filter(([n]) => n !== 'Content-Length')).toEqual(
      comparableHeaders(waiting.capture).filter(([n]) => n !== 'Content-Length'),
    );

    const approval = await replay('04-approval-200.http', sim.port, runId);
    expectSameAnswer(approval.ours, approval.capture, runId);
    await waitForStatus(sim, runId, 'completed');

    const completed = await rawExchange(sim.port, captureRequest('05-status-completed.http', runId));
    const expected = normalize(readCapture('05-status-completed.http').response.body)
      .replace('"output": "Removed ./build."', '"output": "Done."')
      .replace(/"usage": \{[^}]*\}/, '"usage": <usage>');
    expect(normalize(completed.body).replace(/"usage": \{[^}]*\}/, '"usage": <usage>')).toBe(expected);
    expect(completed.body).toMatch(/"usage": \{"input_tokens": \d+, "output_tokens": \d+, "total_tokens": \d+\}\}$/);
  });

  it('409 approval_not_active, 400 invalid choice, 404 stop and 404 events after the run finished', async () => {
    const sim = await startSim({ streamLookupMs: 20 });
    const runId = await startRun(sim, { input: 'hello' });
    const events = await subscribe(sim, runId);
    await events.finished;
    for (const name of ['13-approval-409.http', '14-approval-400-choice.http', '15-stop-finished-404.http', '16-events-after-close-404.http']) {
      const { ours, capture } = await replay(name, sim.port, runId);
      expectSameAnswer(ours, capture, runId);
    }
  });

  it('200 stop of a live run', async () => {
    const sim = await startSim();
    const runId = await startRun(
      sim,
      scripted([
        { type: 'delta', text: 'working' },
        { type: 'sleep', ms: 60_000 },
      ]),
    );
    await waitForStatus(sim, runId, 'running');
    const { ours, capture } = await replay('20-stop-200.http', sim.port, runId);
    expectSameAnswer(ours, capture, runId);
  });

  it('429 when the gate is full', async () => {
    const sim = await startSim({ maxConcurrentRuns: 1 });
    await startRun(sim, { input: 'a' });
    const { ours, capture } = await replay('30-start-429.http', sim.port);
    expectSameAnswer(ours, capture);
  });

  it('413 for a declared body over 10,000,000 bytes, without reading it', async () => {
    const sim = await startSim();
    const request = `POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: 10000001\r\n\r\n`;
    const answer = await rawExchange(sim.port, request);
    expect(answer.statusLine).toBe('HTTP/1.1 413 Payload Too Large');
    expect(answer.body).toBe('{"error": {"message": "Request body too large.", "type": "invalid_request_error", "param": null, "code": "body_too_large"}}');
    expect(answer.header('Content-Type')).toBe('application/json; charset=utf-8');
  });
});

/**
 * Where the released Hermes (0.18.2 and 0.19.0, docs/real-hermes-findings.md) contradicts the
 * reference these captures were made from, the simulator follows Hermes: no security headers on
 * a stream, `allow_permanent` in `approval.request`, `tool.started` before the approval, and
 * `reasoning.available` after every turn with text.
 */
const SECURITY_HEADER_NAMES = new Set<string>(HERMES_SECURITY_HEADERS);
const withoutSecurityHeaders = (headers: Array<[string, string]>) => headers.filter(([name]) => !SECURITY_HEADER_NAMES.has(name.toLowerCase()));
const withoutAllowPermanent = (frame: string) => frame.replace('"allow_permanent": true, ', '');

describe('SSE frames match the captured bytes', () => {
  it('one chunk per frame, data-only frames, stream closed, and the capture headers but the security ones', async () => {
    const sim = await startSim();
    const runId = await startRun(
      sim,
      scripted([
        { type: 'delta', text: 'Checking ' },
        { type: 'delta', text: 'the disk.' },
        { type: 'approval', command: 'rm -rf ./build', pattern_key: 'recursive delete', description: 'recursive delete' },
        { type: 'tool', tool: 'terminal', duration: 0.007 },
        { type: 'reasoning', text: 'cleanup done' },
        { type: 'complete', output: 'Removed ./build.', usage: { input_tokens: 12, output_tokens: 5, total_tokens: 17 } },
      ]),
    );
    await waitForStatus(sim, runId, 'waiting_for_approval');
    const exchange = rawExchange(sim.port, captureRequest('02-events-lifecycle.http', runId));
    const { ours: approval } = await replay('04-approval-200.http', sim.port, runId);
    expect(approval.statusLine).toBe('HTTP/1.1 200 OK');
    const ours = await exchange;
    const capture = readCapture('02-events-lifecycle.http').response;

    expect(ours.statusLine).toBe(capture.statusLine);
    expect(comparableHeaders(ours)).toEqual(withoutSecurityHeaders(comparableHeaders(capture)));
    const ourChunks = dechunk(ours.rawBody).map(withoutAllowPermanent);
    const captured = dechunk(capture.rawBody).filter((frame) => frame !== ': keepalive\n\n');
    // Hermes emits tool.started before the approval; compare frames by event type (the last one of each).
    const byEvent = (frames: string[]): Map<string, string> =>
      new Map(frames.map((frame) => [frame.startsWith('data: ') ? String(JSON.parse(frame.slice(6)).event) : frame, normalize(frame)]));
    const expected = byEvent(captured);
    const actual = byEvent(ourChunks.filter((frame) => frame !== ': keepalive\n\n'));
    expect([...actual.keys()].sort()).toEqual([...expected.keys()].sort());
    for (const [event, frame] of expected) {
      const ourFrame = actual.get(event) ?? '';
      if (event === 'message.delta') continue; // two frames share the key; checked below
      expect(ourFrame).toBe(frame);
    }
    expect(ourChunks.filter((f) => f.includes('"message.delta"')).map(normalize)).toEqual(captured.filter((f) => f.includes('"message.delta"')).map(normalize));
    expect(ourChunks.at(-1)).toBe(': stream closed\n\n');
    expect(ours.rawBody.endsWith('0\r\n\r\n')).toBe(true);
  });
});
