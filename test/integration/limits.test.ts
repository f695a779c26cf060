/**
 * The connector's byte and count limits against real simulator streams: SSE frame and stream
 * sizes, lines that never end, max_events (default and range), the request body limit,
 * invalid UTF-8 and a wrong SSE content type.
 */
import { describe, expect, it } from 'vitest';
import type { AipActionResult, ExecutionContext } from 'aip-connector-hermes-agent';
import type { RunStep } from 'aip-connector-hermes-agent/simulator';
import { grantFor, nextId, script, harnessFactory, type Harness } from '../helpers/harness.js';

const PREFIX = 'connector.hermes_agent.';

/**
 * Scripts come from `body.sim_script`; a `raw` step may give `hex` instead of `data`, so
 * that arbitrary (even invalid UTF-8) bytes can travel through the JSON request body.
 */
function scriptWithBytes(body: Record<string, unknown>): RunStep[] {
  const steps = Array.isArray(body['sim_script']) ? (body['sim_script'] as Array<Record<string, unknown>>) : [];
  return steps.map((step) =>
    step['type'] === 'raw' && typeof step['hex'] === 'string'
      ? { type: 'raw', data: new Uint8Array(Buffer.from(step['hex'], 'hex')) }
      : (step as unknown as RunStep),
  );
}

const harness = harnessFactory({ simulator: { streamLookupMs: 100, script: scriptWithBytes } });

interface EventsOutput {
  http_status: number;
  events: Array<{ event: string; data: Record<string, unknown> }>;
  text: string;
  terminal: boolean;
  truncated?: boolean;
}

function expectFailure(result: AipActionResult, code: string, extra: { remote_status?: number; category?: string } = {}): void {
  expect(result.status, JSON.stringify(result.error)).toBe('failed');
  expect(result.error?.code).toBe(PREFIX + code);
  expect(result.error?.category).toBe(extra.category ?? 'connector');
  expect(result.error?.retryable).toBe(false);
  expect(result.error?.details?.uncertain_outcome).toBe(false);
  expect(result.error?.details?.remote_status).toBe(extra.remote_status);
}

const frame = (event: Record<string, unknown>) => `data: ${JSON.stringify(event)}\n\n`;

async function readEvents(
  h: Harness,
  runId: string,
  extra: { max_events?: number } = {},
  context?: ExecutionContext,
): Promise<{ result: AipActionResult; requests: number }> {
  const before = h.sim.requests.length;
  const result = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId, ...extra } }, context);
  return { result, requests: h.sim.requests.length - before };
}

/** Answers the run's pending approval through the connector (with a grant) when the reader sees it. */
function approveOnRequest(h: Harness, runId: () => string): ExecutionContext {
  return {
    onChunk: async (chunk) => {
      if (chunk.kind !== 'pending_approval') return;
      const input = { run_id: runId(), choice: 'once' };
      const answer = await h.invoke({ capability_id: h.cap('run_approval'), input, idempotency_key: nextId('key') }, { approval: grantFor(input) });
      expect(answer.status, JSON.stringify(answer.error)).toBe('completed');
    },
  };
}

describe('limits.maxSseFrameBytes', () => {
  it('a 2 KiB data line over a 1024-byte frame limit is invalid_response', async () => {
    const h = await harness({ connector: { limits: { maxSseFrameBytes: 1024 } } });
    let runId = '';
    // Whether the frame arrives alone, inside a larger network read, or split across reads
    // must not matter; the approval makes it arrive after the reader is attached, as its own write.
    runId = await h.startRun({
      input: 'hi',
      sim_script: [
        { type: 'delta', text: 'small' },
        { type: 'approval', command: 'ls' },
        { type: 'raw', data: frame({ event: 'message.delta', run_id: 'x', timestamp: 1, delta: 'y'.repeat(2048) }) },
        { type: 'complete' },
      ],
    });
    const { result, requests } = await readEvents(
      h,
      runId,
      {},
      approveOnRequest(h, () => runId),
    );
    expectFailure(result, 'invalid_response', { remote_status: 200 });
    expect(requests).toBe(2); // the events stream and the approval
    const output = result.output as EventsOutput;
    expect(output.http_status).toBe(200);
    expect(output.terminal).toBe(false);
    expect(output.events.some((event) => String(event.data['delta']).length >= 2048)).toBe(false);
    expect(h.chunks.get(result.action_id)?.at(-1)?.kind).toBe('error');
  });

  it('a 2 KiB frame inside the backlog (one large read) is invalid_response as well', async () => {
    const h = await harness({ connector: { limits: { maxSseFrameBytes: 1024 } } });
    const runId = await h.startRun({
      input: 'hi',
      sim_script: [
        { type: 'delta', text: 'small' },
        { type: 'raw', data: frame({ event: 'message.delta', run_id: 'x', timestamp: 1, delta: 'y'.repeat(2048) }) },
        { type: 'complete' },
      ],
    });
    const { result } = await readEvents(h, runId);
    expectFailure(result, 'invalid_response', { remote_status: 200 });
    expect((result.output as EventsOutput).terminal).toBe(false);
  });

  it('frames under the limit pass (control)', async () => {
    const h = await harness({ connector: { limits: { maxSseFrameBytes: 1024 } } });
    const runId = await h.startRun({
      input: 'hi',
      sim_script: [
        { type: 'delta', text: 'y'.repeat(500) },
        { type: 'complete', output: 'ok' },
      ],
    });
    const { result } = await readEvents(h, runId);
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    expect((result.output as EventsOutput).text).toBe('y'.repeat(500));
  });

  it('an SSE line that never ends is invalid_response once it passes the frame limit', async () => {
    // No keepalive either: nothing would ever terminate the line.
    const h = await harness({ connector: { limits: { maxSseFrameBytes: 1024 } }, simulator: { keepaliveMs: 600_000 } });
    // Two pieces of one unterminated line, each under the limit, together over it; then silence.
    const runId = await h.startRun({
      input: 'hi',
      sim_script: [
        { type: 'raw', data: `data: {"event": "message.delta", "delta": "${'z'.repeat(600)}` },
        { type: 'raw', data: 'z'.repeat(600) },
        { type: 'sleep', ms: 60_000 },
        { type: 'complete' },
      ],
    });
    const { result, requests } = await readEvents(h, runId);
    expectFailure(result, 'invalid_response', { remote_status: 200 });
    expect(requests).toBe(1);
    expect((result.output as EventsOutput).events).toEqual([]);
    expect(h.chunks.get(result.action_id)?.map((chunk) => chunk.kind)).toEqual(['error']);
  });
});

describe('limits.maxStreamResponseBytes', () => {
  it('many deltas over a small stream limit: invalid_response with the partial output', async () => {
    const h = await harness({ connector: { limits: { maxStreamResponseBytes: 4096, maxSseFrameBytes: 1024 } } });
    let runId = '';
    const deltas = Array.from({ length: 60 }, (_, n) => ({ type: 'delta', text: `${String(n).padStart(2, '0')}${'-'.repeat(98)}` }));
    // The approval holds the bulk back until the reader has consumed the first events.
    runId = await h.startRun({
      input: 'hi',
      sim_script: [{ type: 'delta', text: 'first ' }, { type: 'approval', command: 'ls' }, ...deltas, { type: 'complete' }],
    });
    const { result } = await readEvents(
      h,
      runId,
      {},
      approveOnRequest(h, () => runId),
    );
    expectFailure(result, 'invalid_response', { remote_status: 200 });
    const output = result.output as EventsOutput;
    expect(output.http_status).toBe(200);
    expect(output.terminal).toBe(false);
    expect(output.events.map((event) => event.event).slice(0, 4)).toEqual(['message.delta', 'reasoning.available', 'tool.started', 'approval.request']);
    expect(output.text.startsWith('first ')).toBe(true);
    // Less than the whole stream: 60 frames of well over 100 bytes cannot fit in 4096.
    expect(output.events.filter((event) => event.event === 'message.delta').length).toBeLessThan(61);
    expect(output.text.length).toBeLessThan(4096);
    expect(h.chunks.get(result.action_id)?.at(-1)?.kind).toBe('error');
  });
});

describe('max_events', () => {
  it('limits.defaultMaxEvents applies when the input gives none', async () => {
    const h = await harness({ connector: { limits: { defaultMaxEvents: 3 } } });
    const steps = ['a', 'b', 'c', 'd', 'e'].map((text) => ({ type: 'delta', text }));
    const runId = await h.startRun({ input: 'hi', sim_script: [...steps, { type: 'complete', output: 'abcde' }] });
    const { result } = await readEvents(h, runId);
    expectFailure(result, 'stream_truncated');
    const output = result.output as EventsOutput;
    expect(output.events).toHaveLength(3);
    expect(output.text).toBe('abc');
    expect(output.truncated).toBe(true);
    expect(output.terminal).toBe(false);
  });

  it('an explicit max_events overrides the default', async () => {
    const h = await harness({ connector: { limits: { defaultMaxEvents: 3 } } });
    const steps = ['a', 'b', 'c', 'd', 'e'].map((text) => ({ type: 'delta', text }));
    const runId = await h.startRun({ input: 'hi', sim_script: [...steps, { type: 'complete', output: 'abcde' }] });
    const { result } = await readEvents(h, runId, { max_events: 10 });
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    // Five deltas, reasoning.available (the turn's text), run.completed.
    expect((result.output as EventsOutput).events).toHaveLength(7);
  });

  it.each([[0], [100_001], [-1], [2.5]])('max_events %d is invalid_input, no request', async (maxEvents) => {
    const h = await harness();
    const { result, requests } = await readEvents(h, `run_${'2'.repeat(32)}`, { max_events: maxEvents });
    expectFailure(result, 'invalid_input', { category: 'permanent' });
    expect(requests).toBe(0);
  });

  it('max_events 100000 is accepted', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: script.quick() });
    const { result, requests } = await readEvents(h, runId, { max_events: 100_000 });
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    expect(requests).toBe(1);
  });

  it('max_events 1 on a one-event run: the terminal event wins over truncation', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: [{ type: 'complete', output: 'only' }] });
    const { result } = await readEvents(h, runId, { max_events: 1 });
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    expect((result.output as EventsOutput).terminal).toBe(true);
  });
});

describe('limits.maxRequestBodyBytes', () => {
  it('a request body over the limit is invalid_input, no request', async () => {
    const h = await harness({ connector: { limits: { maxRequestBodyBytes: 256 } } });
    const before = h.sim.requests.length;
    const result = await h.invoke({ capability_id: h.cap('run_start'), input: { body: { input: 'x'.repeat(300) } }, idempotency_key: nextId('key') });
    expectFailure(result, 'invalid_input', { category: 'permanent' });
    expect(h.sim.requests.length - before).toBe(0);
    expect(h.sim.startCount()).toBe(0);
  });

  it('a request body at the limit is sent (control)', async () => {
    const h = await harness({ connector: { limits: { maxRequestBodyBytes: 256 } } });
    const body = { input: 'x' };
    const padded = { ...body, pad: 'p'.repeat(256 - Buffer.byteLength(JSON.stringify({ ...body, pad: '' }))) };
    expect(Buffer.byteLength(JSON.stringify(padded))).toBe(256);
    const result = await h.invoke({ capability_id: h.cap('run_start'), input: { body: padded }, idempotency_key: nextId('key') });
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    expect(h.sim.startCount()).toBe(1);
  });
});

describe('stream content', () => {
  it('invalid UTF-8 bytes in the stream are invalid_response', async () => {
    const h = await harness();
    const bad = Buffer.concat([Buffer.from('data: {"event": "message.delta", "delta": "'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}\n\n')]);
    const runId = await h.startRun({
      input: 'hi',
      sim_script: [{ type: 'delta', text: 'ok ' }, { type: 'raw', hex: bad.toString('hex') }, { type: 'complete' }],
    });
    const { result } = await readEvents(h, runId);
    expectFailure(result, 'invalid_response', { remote_status: 200 });
    const output = result.output as EventsOutput;
    expect(output.terminal).toBe(false);
    expect(output.events.every((event) => event.event === 'message.delta' && event.data['delta'] === 'ok ')).toBe(true);
  });

  it('an SSE request answered 200 with application/json is invalid_response', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: script.quick() });
    h.sim.injectFault({
      route: 'events',
      response: { status: 200, headers: { 'Content-Type': 'application/json' }, body: '{"event": "run.completed", "output": "fake"}' },
    });
    const { result, requests } = await readEvents(h, runId);
    expectFailure(result, 'invalid_response', { remote_status: 200 });
    expect(requests).toBe(1);
    expect(JSON.stringify(result.error)).not.toContain('fake');
    expect(h.chunks.get(result.action_id)?.map((chunk) => chunk.kind)).toEqual(['error']);
  });
});
