/**
 * Streams that resume (issue 24, part 3; issue 32, item 3), against the simulator's `later` profile,
 * which numbers events (`seq`, SSE `id:`) and replays them after `?last_seq=N`, and its `v0.22` one,
 * which also replays after `Last-Event-ID` and from the start without either. A `cut` step destroys the
 * subscriber's socket; the run goes on, and its next steps are all emitted before the connector
 * can notice the cut (they run without awaiting I/O), so what a resumption replays is fixed.
 * An `approval` step holds the run until the test answers it.
 */
import { describe, expect, it } from 'vitest';
import { API_KEY, eventually, harnessFactory, type Harness } from '../helpers/harness.js';

const PREFIX = 'connector.hermes_agent.';
const harness = harnessFactory({ simulator: { streamLookupMs: 100 } });

interface EventsOutput {
  events: Array<{ event: string; data: Record<string, unknown> }>;
  text: string;
  terminal: boolean;
  terminal_event?: string;
  resumed?: number;
  resume_fallback?: string;
  events_lost?: Array<{ from_seq: number; to_seq: number | null; after_events: number; reason: string }>;
  reconciliation?: { http_status: number | null; status?: Record<string, unknown> };
}

const delta = (text: string) => ({ type: 'delta', text });
const approval = { type: 'approval', command: 'rm -rf ./build' };
/** An approval, its tool, then the cut: the run holds before the cut until the test answers. */
const heldCut = [approval, { type: 'tool', tool: 'terminal' }, { type: 'cut' }];
const complete = { type: 'complete', output: 'done' };

/** run_events, with the run's first `approvals` approvals answered as their chunks arrive. */
async function eventsAnswering(h: Harness, runId: string, approvals: number) {
  const reading = events(h, runId);
  for (let nth = 1; nth <= approvals; nth += 1) await answerApproval(h, runId, nth);
  return reading;
}

const events = (h: Harness, runId: string) => h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } });
const resumptions = (h: Harness) => h.sim.requests.filter((request) => request.path.endsWith('/events')).map((request) => request.rawPath.split('?')[1] ?? '');
const seqs = (output: EventsOutput) => output.events.map((event) => event.data['seq'] as number);

/** The events the simulator emitted for the run, as the connector should hold them: every one, once, in order. */
function emitted(h: Harness, runId: string): number[] {
  return (h.sim.run(runId)?.events ?? []).map((event) => event['seq'] as number);
}

/** Consecutive numbers grouped into [first, last] ranges. */
function gaps(seqs: number[]): Array<[number, number]> {
  const ranges: Array<[number, number]> = [];
  for (const seq of seqs) {
    const last = ranges.at(-1);
    if (last && last[1] === seq - 1) last[1] = seq;
    else ranges.push([seq, seq]);
  }
  return ranges;
}

/** Answers the run's pending approval once the host has received `nth` pending_approval chunks. */
async function answerApproval(h: Harness, runId: string, nth: number): Promise<void> {
  const seen = () => [...h.chunks.values()].flat().filter((chunk) => chunk.kind === 'pending_approval').length;
  await eventually(() => seen() >= nth || undefined, `approval chunk ${nth} of run ${runId}`);
  await postApproval(h, runId);
}

/** Answers the run's pending approval (deny). */
async function postApproval(h: Harness, runId: string): Promise<void> {
  const response = await fetch(`${h.sim.url}/v1/runs/${runId}/approval`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ choice: 'deny' }),
  });
  expect(response.status).toBe(200);
}

describe.each(['later', 'v0.22'] as const)('a cut stream resumes after its last seq (%s)', (profile) => {
  const profileHarness = harnessFactory({ simulator: { profile, streamLookupMs: 100 } });

  it('once: every event exactly once, in order, and output.resumed 1', async () => {
    const h = await profileHarness();
    const runId = await h.startRun({ input: 'hi', sim_script: [delta('one '), ...heldCut, delta('two '), complete] });
    const result = await eventsAnswering(h, runId, 1);
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    const output = result.output as EventsOutput;
    expect(output.resumed).toBe(1);
    expect(output.terminal_event).toBe('run.completed');
    expect(output.text).toBe('one \n\ntwo '); // a delta after a tool turn starts a paragraph, as in Hermes
    expect(seqs(output)).toEqual(emitted(h, runId));
    expect(new Set(seqs(output)).size).toBe(output.events.length);
    const [first, resumption] = resumptions(h);
    expect(first).toBe('');
    expect(resumption).toMatch(/^last_seq=\d+$/);
    const resumed = h.sim.requests.filter((request) => request.path.endsWith('/events'))[1];
    expect(resumed?.headers['last-event-id']).toBe(resumption?.slice('last_seq='.length));
    expect((h.chunks.get(result.action_id) ?? []).map((chunk) => chunk.kind)).toHaveLength(output.events.length);
  });

  it('twice: still every event once, in order', async () => {
    const h = await profileHarness();
    const runId = await h.startRun({ input: 'hi', sim_script: [delta('a '), ...heldCut, delta('b '), ...heldCut, delta('c '), complete] });
    const result = await eventsAnswering(h, runId, 2);
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    const output = result.output as EventsOutput;
    expect(output.resumed).toBe(2);
    expect(seqs(output)).toEqual(emitted(h, runId));
    expect(output.text).toBe('a \n\nb \n\nc ');
  });

  it('at most three times: a fourth cut ends in today’s reconciliation', async () => {
    const h = await profileHarness();
    const script = [delta('1'), ...heldCut, delta('2'), ...heldCut, delta('3'), ...heldCut, delta('4'), ...heldCut, delta('5'), approval, complete];
    const runId = await h.startRun({ input: 'hi', sim_script: script });
    const result = await eventsAnswering(h, runId, 4);
    expect(result.error?.code).toBe(`${PREFIX}stream_incomplete`);
    const output = result.output as EventsOutput;
    expect(output.resumed).toBe(3);
    expect(output.text).toBe('1\n\n2\n\n3\n\n4');
    expect(seqs(output)).toEqual(emitted(h, runId).slice(0, output.events.length));
    expect(output.reconciliation?.status?.['status']).toBe('waiting_for_approval');
    expect(result.error?.message).toContain('after 3 resumptions');
  });

  it('replay.truncated: the events Hermes no longer kept are named in events_lost, and the kept ones are read to the end', async () => {
    const h = await profileHarness({ simulator: { profile, streamLookupMs: 100, replayRetainedEvents: 1 } });
    const runId = await h.startRun({ input: 'hi', sim_script: [delta('kept '), ...heldCut, delta('lost '), delta('also lost '), approval, complete] });
    const result = await eventsAnswering(h, runId, 2);
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    const output = result.output as EventsOutput;
    const read = seqs(output);
    const missing = emitted(h, runId).filter((seq) => !read.includes(seq));
    expect(missing.length).toBeGreaterThan(0);
    // Each gap in what was read is named, after the events read before it (on v0.22 the first plain
    // subscription may already find the oldest events gone).
    expect(output.events_lost).toEqual(
      gaps(missing).map(([from, to]) => ({ from_seq: from, to_seq: to, after_events: read.filter((seq) => seq < from).length, reason: 'replay_truncated' })),
    );
    expect(output).toMatchObject({ resumed: 1, terminal: true, terminal_event: 'run.completed' });
    expect(output.text).not.toContain('lost');
    expect(output.events.map((event) => event.event)).not.toContain('replay.truncated');
    expect(new Set(read).size).toBe(read.length);
  });

  it('a 404 on resume falls back to reconciliation and says so', async () => {
    const h = await profileHarness();
    const runId = await h.startRun({ input: 'hi', sim_script: [delta('before '), ...heldCut, delta('after '), approval, complete] });
    const reading = events(h, runId);
    await eventually(() => [...h.chunks.values()].flat().some((chunk) => chunk.kind === 'pending_approval') || undefined, 'the first approval chunk');
    h.sim.injectFault({
      route: 'events',
      response: { status: 404, body: JSON.stringify({ error: { message: 'gone', type: 'invalid_request_error', param: null, code: 'run_not_found' } }) },
    });
    await answerApproval(h, runId, 1);
    const result = await reading;
    expect(result.error?.code).toBe(`${PREFIX}stream_incomplete`);
    const output = result.output as EventsOutput;
    expect(output).toMatchObject({ resumed: 1, resume_fallback: 'not_found', text: 'before ' });
    expect(result.error?.message).toContain('404 to the resumption');
    expect(output.reconciliation?.http_status).toBe(200);
  });
});

describe('a resumption whose stream turns out unnumbered', () => {
  it('stops resuming and reconciles, without publishing the unnumbered event', async () => {
    const h = await harness({ simulator: { profile: 'later', streamLookupMs: 100 } });
    const runId = await h.startRun({ input: 'hi', sim_script: [delta('before '), ...heldCut, delta('after '), approval, complete] });
    const reading = events(h, runId);
    await eventually(() => [...h.chunks.values()].flat().some((chunk) => chunk.kind === 'pending_approval') || undefined, 'the first approval chunk');
    h.sim.injectFault({
      route: 'events',
      response: { status: 200, headers: { 'content-type': 'text/event-stream' }, body: 'data: {"event": "message.delta", "delta": "unnumbered"}\n\n' },
    });
    await answerApproval(h, runId, 1);
    const result = await reading;
    expect(result.error?.code).toBe(`${PREFIX}stream_incomplete`);
    const output = result.output as EventsOutput;
    expect(output).toMatchObject({ resumed: 1, resume_fallback: 'not_numbered', text: 'before ' });
    expect(output.events.every((event) => typeof event.data['seq'] === 'number')).toBe(true);
    expect(result.error?.message).toContain('without a number');
    expect(output.reconciliation?.http_status).toBe(200);
  });
});

describe('without sequence numbers, today’s behaviour', () => {
  it('v0.20 (no seq): a cut stream is not resumed, only reconciled', async () => {
    const h = await harness({ simulator: { profile: 'v0.20', streamLookupMs: 100 } });
    const runId = await h.startRun({ input: 'hi', sim_script: [delta('before '), ...heldCut, delta('after '), approval, complete] });
    const result = await eventsAnswering(h, runId, 1);
    expect(result.error?.code).toBe(`${PREFIX}stream_incomplete`);
    const output = result.output as EventsOutput;
    expect(output).not.toHaveProperty('resumed');
    expect(output).not.toHaveProperty('resume_fallback');
    expect(output.text).toBe('before ');
    expect(resumptions(h)).toEqual(['']);
    expect(result.error?.message).not.toContain('resum');
  });
});

describe.each(['later', 'v0.22'] as const)('a caller resumes with last_seq (%s)', (profile) => {
  const profileHarness = harnessFactory({ simulator: { profile, streamLookupMs: 100 } });
  const eventsAfter = (h: Harness, runId: string, lastSeq: number) =>
    h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId, last_seq: lastSeq } });

  it('gets exactly the events after its cursor, asked for with ?last_seq= and Last-Event-ID', async () => {
    const h = await profileHarness();
    const runId = await h.startRun({ input: 'hi', sim_script: [delta('a '), delta('b '), delta('c '), delta('d '), complete] });
    const whole = await events(h, runId);
    expect(whole.status, JSON.stringify(whole.error)).toBe('completed');
    const all = seqs(whole.output as EventsOutput);
    const cursor = all[1] as number;
    const result = await eventsAfter(h, runId, cursor);
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    const output = result.output as EventsOutput;
    expect(seqs(output)).toEqual(all.slice(2));
    expect(output.text).toBe('c d ');
    expect(output).not.toHaveProperty('events_lost');
    const request = h.sim.requests.filter((each) => each.path.endsWith('/events')).at(-1);
    expect(request?.rawPath.split('?')[1]).toBe(`last_seq=${cursor}`);
    expect(request?.headers['last-event-id']).toBe(String(cursor));
    const kinds = (h.chunks.get(result.action_id) ?? []).map((chunk) => chunk.kind);
    expect(kinds).toHaveLength(all.length - 2);
    expect(kinds.at(-1)).toBe('done');
  });

  it('after a cut stream, gets the events it missed and none it had, with a replay that no longer reaches back named', async () => {
    const h = await profileHarness({ simulator: { profile, streamLookupMs: 100, replayRetainedEvents: 2 } });
    const runId = await h.startRun({ input: 'hi', sim_script: [delta('one '), approval, delta('two '), delta('three '), delta('four '), complete] });
    const cut = new AbortController();
    const first = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } }, { signal: cut.signal, onChunk: () => cut.abort() });
    const had = seqs(first.output as EventsOutput);
    expect(had).toHaveLength(1);
    await eventually(() => h.sim.run(runId)?.status === 'waiting_for_approval' || undefined, `run ${runId} waiting for its approval`);
    await postApproval(h, runId);
    await eventually(() => h.sim.run(runId)?.status === 'completed' || undefined, `run ${runId} completed`);
    const result = await eventsAfter(h, runId, had[0] as number);
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    const output = result.output as EventsOutput;
    const read = seqs(output);
    const missing = emitted(h, runId).filter((seq) => seq > (had[0] as number) && !read.includes(seq));
    expect(read.every((seq) => seq > (had[0] as number))).toBe(true);
    expect(output.events_lost).toEqual(
      gaps(missing).map(([from, to]) => ({ from_seq: from, to_seq: to, after_events: read.filter((seq) => seq < from).length, reason: 'replay_truncated' })),
    );
    expect(missing.length).toBeGreaterThan(0);
    expect(output.terminal_event).toBe('run.completed');
  });
});

describe('a caller’s cursor where Hermes does not number its events', () => {
  it('v0.20: resume_unsupported before any event is published', async () => {
    const h = await harness({ simulator: { profile: 'v0.20', streamLookupMs: 100 } });
    const runId = await h.startRun({ input: 'hi', sim_script: [delta('unnumbered '), approval, complete] });
    const result = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId, last_seq: 0 } });
    expect(result.error?.code).toBe(`${PREFIX}resume_unsupported`);
    expect(result.error?.message).toContain('without a number');
    expect((h.chunks.get(result.action_id) ?? []).map((chunk) => chunk.kind)).toEqual(['error']);
    expect((result.output as EventsOutput | undefined)?.events ?? []).toEqual([]);
  });
});
