/**
 * connector.cancel() (the host cancelling an admitted action: POST …/stop for input.run_id,
 * no approval grant, tenant binding and credentials still enforced) and connector.close().
 */
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import type { AipAction, AipActionResult, AipStreamChunk, ExecutionContext } from 'aip-connector-hermes-agent';
import { API_KEY, ENDPOINT, eventually, nextId, script, harnessFactory, type Harness } from '../helpers/harness.js';
import { assertMatches } from '../helpers/schema-check.js';

const PREFIX = 'connector.hermes_agent.';

const harness = harnessFactory({ simulator: { streamLookupMs: 100 } });

function expectFailure(result: AipActionResult | null, expected: { code: string; category: string; operation?: string }): void {
  expect(result).not.toBeNull();
  expect(result?.status, JSON.stringify(result?.error)).toBe('failed');
  expect(result?.error?.code).toBe(PREFIX + expected.code);
  expect(result?.error?.category).toBe(expected.category);
  expect(result?.error?.retryable).toBe(false);
  expect(result?.error?.details?.uncertain_outcome).toBe(false);
  expect(result?.error?.details?.remote_status).toBeUndefined();
  if (expected.operation) expect(result?.error?.details?.operation).toBe(expected.operation);
}

/**
 * connector.cancel() with the result checked against schemas/. (Harness.cancel treats a
 * run_events action as a stream, but cancel() answers with a run_stop result that streams
 * nothing, and it would overwrite the chunks recorded for the same action id.)
 */
async function cancel(
  h: Harness,
  partial: Partial<AipAction> & { capability_id: string; input: unknown },
  context?: ExecutionContext,
): Promise<AipActionResult | null> {
  const action = { id: nextId('act'), ...partial } as AipAction;
  const result = await h.connector.cancel(action, context);
  if (result === null) return null;
  assertMatches('aip/action-result.schema.json', result);
  expect(result.action_id).toBe(action.id);
  if (result.status === 'completed') assertMatches('operations/run_stop.output.schema.json', result.output);
  return result;
}

/** A promise settled by the first chunk a run_events reader publishes: the stream is then open. */
function firstChunk(): { seen: Promise<AipStreamChunk>; onChunk: (chunk: AipStreamChunk) => void } {
  let resolve: (chunk: AipStreamChunk) => void = () => {};
  const seen = new Promise<AipStreamChunk>((settle) => {
    resolve = settle;
  });
  return { seen, onChunk: (chunk) => resolve(chunk) };
}

describe('cancel()', () => {
  it('a run_events action with input.run_id: POST …/stop without an approval grant → completed {run_id, status: stopping}', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: script.long() });
    const before = h.sim.requests.length;
    const result = await cancel(h, { capability_id: h.cap('run_events'), input: { run_id: runId } });
    expect(result?.status, JSON.stringify(result?.error)).toBe('completed');
    expect(result?.output).toEqual({ run_id: runId, status: 'stopping' });
    expect(result?.receipt?.operation).toBe('run_stop');
    const sent = h.sim.requests.slice(before);
    expect(sent.map((request) => `${request.method} ${request.rawPath}`)).toEqual([`POST /v1/runs/${runId}/stop`]);
    expect(sent[0]?.headers['authorization']).toBe(`Bearer ${API_KEY}`);
    expect(typeof sent[0]?.headers['idempotency-key']).toBe('string');
    expect(sent[0]?.body).toBe('');
    await eventually(() => h.sim.run(runId)?.status === 'cancelled' || undefined, 'the run to be cancelled');
  });

  it('cancelling the same action twice stops the run once: the second cancel replays the first stop', async () => {
    const h = await harness({ simulator: { profile: 'later' } });
    const runId = await h.startRun({ input: 'hi', sim_script: script.long() });
    const action = { id: nextId('act'), capability_id: h.cap('run_events'), input: { run_id: runId } };
    const before = h.sim.requests.length;
    const first = await cancel(h, action);
    const second = await cancel(h, action);
    const stops = h.sim.requests.slice(before);
    expect(stops).toHaveLength(1);
    expect(stops[0]?.headers['idempotency-key']).toMatch(/^aip1-[0-9a-f]{64}$/);
    expect(second?.output).toEqual(first?.output);
    expect(second?.receipt).toMatchObject({ replayed: true, original_action_id: action.id });
  });

  it('still enforces tenant binding: tenant_mismatch, no request', async () => {
    const h = await harness({ endpoint: { tenantId: 'tenant-a' } });
    const runId = await h.startRun({ input: 'hi', sim_script: script.long() }, { context: { tenantId: 'tenant-a' } });
    for (const context of [undefined, { tenantId: 'tenant-b' }]) {
      const before = h.sim.requests.length;
      const result = await cancel(h, { capability_id: h.cap('run_events'), input: { run_id: runId } }, context);
      expectFailure(result, { code: 'tenant_mismatch', category: 'auth', operation: 'run_stop' });
      expect(h.sim.requests.length - before).toBe(0);
    }
    expect(h.sim.run(runId)?.status).toBe('running');
    // The matching tenant may cancel.
    const allowed = await cancel(h, { capability_id: h.cap('run_events'), input: { run_id: runId } }, { tenantId: 'tenant-a' });
    expect(allowed?.status, JSON.stringify(allowed?.error)).toBe('completed');
  });

  it('still needs credentials: missing_credential, no request', async () => {
    const h = await harness({ endpoint: { apiKey: undefined } });
    const result = await cancel(h, { capability_id: h.cap('run_events'), input: { run_id: `run_${'3'.repeat(32)}` } });
    expectFailure(result, { code: 'missing_credential', category: 'auth', operation: 'run_stop' });
    expect(result?.error?.details?.endpoint_id).toBe(ENDPOINT);
    expect(h.sim.requests).toHaveLength(0);
  });

  it('a run_start action (no run_id) → null, no request', async () => {
    const h = await harness();
    const result = await cancel(h, { capability_id: h.cap('run_start'), input: { body: { input: 'hi' } }, idempotency_key: nextId('key') });
    expect(result).toBeNull();
    expect(h.sim.requests).toHaveLength(0);
  });

  it('a run the ledger already records as finished → null, no stop request (Hermes would refuse it)', async () => {
    const h = await harness();
    const start = {
      id: nextId('act'),
      capability_id: h.cap('run_start'),
      input: { body: { input: 'hi', sim_script: script.quick() } },
      idempotency_key: nextId('key'),
    };
    const started = await h.invoke(start, { tenantId: 'tenant-a' });
    const runId = (started.output as { run_id: string }).run_id;
    await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } }, { tenantId: 'tenant-a' });
    expect(await h.connector.evidence(start.id, { tenantId: 'tenant-a' })).toMatchObject({ terminal_event: 'run.completed' });
    const before = h.sim.requests.length;
    expect(await h.cancel(start, { tenantId: 'tenant-a' })).toBeNull();
    expect(await h.cancel({ capability_id: h.cap('run_status'), input: { run_id: runId } }, { tenantId: 'tenant-a' })).toBeNull();
    expect(h.sim.requests.slice(before)).toEqual([]);
    // Another tenant has no record of the run: its cancel is sent, and Hermes answers for itself.
    const other = await h.cancel({ capability_id: h.cap('run_status'), input: { run_id: runId } }, { tenantId: 'tenant-b' });
    expect(other?.error?.code).toBe(`${PREFIX}not_found`);
  });

  it('a cancel repeated after the run finished replays its first stop instead of answering null', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'long', sim_script: script.long() });
    const action = { id: nextId('act'), capability_id: h.cap('run_events'), input: { run_id: runId } };
    const first = await h.cancel(action);
    expect(first?.status, JSON.stringify(first?.error)).toBe('completed');
    await eventually(() => h.sim.run(runId)?.status === 'cancelled' || undefined, 'the run cancelled');
    const read = await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: runId } });
    expect(read.output).toMatchObject({ status: 'cancelled' });
    const stopsBefore = h.sim.requests.filter((request) => request.path.endsWith('/stop')).length;
    const again = await h.cancel(action);
    expect(again?.receipt).toMatchObject({ replayed: true, original_action_id: action.id });
    expect(h.sim.requests.filter((request) => request.path.endsWith('/stop'))).toHaveLength(stopsBefore);
  });

  it('an unknown capability → failed unsupported_capability, no request', async () => {
    const h = await harness();
    const result = await cancel(h, { capability_id: 'cap:hermes_agent:elsewhere:run_events', input: { run_id: `run_${'4'.repeat(32)}` } });
    expect(result?.status).toBe('failed');
    expect(result?.error?.code).toBe(`${PREFIX}unsupported_capability`);
    expect(result?.error?.category).toBe('permanent');
    expect(h.sim.requests).toHaveLength(0);
  });

  it('a run_events invocation in flight ends with run.cancelled → status cancelled without error, final chunk done', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: script.long() });
    const open = firstChunk();
    const action = { id: nextId('act'), capability_id: h.cap('run_events'), input: { run_id: runId } };
    const reading = h.invoke(action, { onChunk: open.onChunk });
    await open.seen;

    const stopped = await cancel(h, action);
    expect(stopped?.status, JSON.stringify(stopped?.error)).toBe('completed');

    const result = await reading;
    expect(result.status).toBe('cancelled');
    expect(result.error).toBeUndefined();
    const output = result.output as { terminal: boolean; terminal_event: string; text: string; events: Array<{ event: string }> };
    expect(output.terminal).toBe(true);
    expect(output.terminal_event).toBe('run.cancelled');
    expect(output.text).toBe('working');
    expect(output.events.map((event) => event.event)).toEqual(['message.delta', 'run.cancelled']);
    const chunks = h.chunks.get(action.id) ?? [];
    expect(chunks.map((chunk) => chunk.kind)).toEqual(['data', 'done']);
  });
});

describe('close()', () => {
  it('close() while a stream is open: that invoke resolves cancelled, and close() resolves', async () => {
    const h = await harness({ simulator: { maxConcurrentRuns: 1 } });
    const runId = await h.startRun({ input: 'hi', sim_script: script.long() });
    const open = firstChunk();
    const reading = h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } }, { onChunk: open.onChunk });
    await open.seen;

    await h.connector.close();
    const result = await reading;
    expect(result.status).toBe('cancelled');
    expect(result.error?.code).toBe(`${PREFIX}cancelled`);
    expect(result.error?.category).toBe('temporary');
    expect(result.error?.retryable).toBe(false);
    expect(result.error?.details?.uncertain_outcome).toBe(false);
    expect((result.output as { events: unknown[] }).events).toHaveLength(1);
    expect(h.chunks.get(result.action_id)?.map((chunk) => chunk.kind)).toEqual(['data', 'error']);
    // The simulator saw the subscriber go: the run's stream no longer holds the only slot.
    await eventually(async () => {
      const before = h.sim.startCount();
      const answer = await request(`${h.sim.url}/v1/runs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ input: 'probe', sim_script: script.quick() }),
      });
      await answer.body.dump();
      return (answer.statusCode === 202 && h.sim.startCount() === before + 1) || undefined;
    }, 'the concurrency slot to be released');
  });

  it('invoke after close() resolves (cancelled) without a request', async () => {
    const h = await harness();
    await h.connector.close();
    const result = await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: `run_${'5'.repeat(32)}` } });
    expect(result.status).toBe('cancelled');
    expect(result.error?.code).toBe(`${PREFIX}cancelled`);
    expect(h.sim.requests).toHaveLength(0);
    const events = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: `run_${'5'.repeat(32)}` } });
    expect(events.status).toBe('cancelled');
    expect(events.error?.code).toBe(`${PREFIX}cancelled`);
    expect(h.sim.requests).toHaveLength(0);
    await h.connector.close(); // idempotent
  });
});
