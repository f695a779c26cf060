/**
 * The connector against every simulator profile: `pin` (Hermes 0.18.2, the pinned revision: state
 * in memory only, one SSE subscription per run), `v0.19` (Hermes 0.19.0: stop only interrupts, the
 * 429 gate counts live runs) and `later` (§9 of the Hermes reference: Idempotency-Key on runs,
 * `replayed`, `interrupted` after a restart, stop on terminal runs). test/real-hermes/fidelity.test.ts
 * holds `pin` and `v0.19` against the released Hermes.
 */
import { describe, expect, it } from 'vitest';
import type { AipActionResult, ExecutionContext } from 'aip-connector-hermes-agent';
import { API_KEY, eventually, grantFor, nextId, script, harnessFactory, type Harness, type HarnessOptions } from '../helpers/harness.js';
import { providerKeyOf } from '../helpers/provider-key.js';

const PREFIX = 'connector.hermes_agent.';
const RUN_ID = /^run_[0-9a-f]{32}$/;

const harness = harnessFactory({ simulator: { streamLookupMs: 100 } });

function expectFailure(result: AipActionResult, expected: { code: string; remote_status: number; provider_code: string; operation: string }): void {
  expect(result.status, JSON.stringify(result.error)).toBe('failed');
  expect(result.error?.code).toBe(PREFIX + expected.code);
  expect(result.error?.category).toBe('permanent');
  expect(result.error?.retryable).toBe(false);
  expect(result.error?.details?.uncertain_outcome).toBe(false);
  expect(result.error?.details?.remote_status).toBe(expected.remote_status);
  expect(result.error?.details?.provider_code).toBe(expected.provider_code);
  expect(result.error?.details?.operation).toBe(expected.operation);
}

const start = (h: Harness, body: Record<string, unknown>, idempotencyKey: string, context?: ExecutionContext) =>
  h.invoke({ capability_id: h.cap('run_start'), input: { body }, idempotency_key: idempotencyKey }, context);
const status = (h: Harness, runId: string, context?: ExecutionContext) => h.invoke({ capability_id: h.cap('run_status'), input: { run_id: runId } }, context);
const events = (h: Harness, runId: string, context?: ExecutionContext) => h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } }, context);
const stop = (h: Harness, runId: string) =>
  h.invoke({ capability_id: h.cap('run_stop'), input: { run_id: runId }, idempotency_key: nextId('key') }, { approval: grantFor({ run_id: runId }) });

async function waitForStatus(h: Harness, runId: string, wanted: string): Promise<void> {
  await eventually(() => h.sim.run(runId)?.status === wanted || undefined, `run ${runId} ${wanted} (now ${h.sim.run(runId)?.status})`);
}

/** A restart drops every connection; wait until a request gets through again (bounded, not timed). */
async function restart(h: Harness): Promise<void> {
  h.sim.restart();
  await eventually(
    async () => (await status(h, `run_${'f'.repeat(32)}`)).error?.code === `${PREFIX}not_found` || undefined,
    'the simulator to answer after its restart',
  );
}

describe('later profile', () => {
  const later: HarnessOptions = { simulator: { profile: 'later' } };

  it('the 202 body carries replayed:false and passes output validation', async () => {
    const h = await harness(later);
    const result = await start(h, { input: 'hi', sim_script: script.quick() }, nextId('key'));
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    expect(result.output).toEqual({ run_id: expect.stringMatching(RUN_ID), status: 'started', replayed: false });
    expect(result.receipt?.http_status).toBe(202);
  });

  it('the connector deduplicates first: the same key and body replay without a second POST; another body is a local conflict', async () => {
    const h = await harness(later);
    const key = nextId('idem');
    const body = { input: 'hi', sim_script: script.long() };
    const first = await start(h, body, key);
    expect(first.status, JSON.stringify(first.error)).toBe('completed');
    const runId = (first.output as { run_id: string }).run_id;
    expect(h.sim.run(runId)?.idempotencyKey).toBe(providerKeyOf(h.cap('run_start'), key));

    const second = await start(h, structuredClone(body), key);
    expect(second.status, JSON.stringify(second.error)).toBe('completed');
    expect((second.output as { run_id: string }).run_id).toBe(runId);
    expect(second.receipt).toMatchObject({ replayed: true, original_action_id: first.action_id });

    const third = await start(h, { ...body, input: 'something else' }, key);
    expect(third.error).toMatchObject({ code: `${PREFIX}idempotency_conflict`, category: 'permanent', retryable: false });
    expect(third.error?.details?.original_action_id).toBe(first.action_id);

    const starts = h.sim.requests.filter((request) => request.method === 'POST' && request.rawPath === '/v1/runs');
    expect(starts).toHaveLength(1);
    expect(starts[0]?.headers['idempotency-key']).toBe(providerKeyOf(h.cap('run_start'), key));
  });

  it('a newer Hermes enforces the forwarded Idempotency-Key too: a connector that lost its ledger gets the same run back, or a provider conflict', async () => {
    const h = await harness(later);
    const key = nextId('idem');
    const body = { input: 'hi', sim_script: script.long() };
    const first = await start(h, body, key);
    const runId = (first.output as { run_id: string }).run_id;

    // Connectors with their own, empty ledgers: only the provider can recognise the key.
    const { createHermesConnector } = await import('aip-connector-hermes-agent');
    const startFresh = async (input: Record<string, unknown>) => {
      const amnesiac = createHermesConnector({ endpoints: [{ id: 'local', baseUrl: h.sim.url, apiKey: API_KEY }] });
      try {
        return await amnesiac.invoke({ id: nextId(), capability_id: h.cap('run_start'), input, idempotency_key: key });
      } finally {
        await amnesiac.close();
      }
    };
    const again = await startFresh({ body });
    expect(again.status, JSON.stringify(again.error)).toBe('completed');
    expect(again.output).toEqual({ run_id: runId, status: 'started', replayed: true });
    expect(h.sim.startCount()).toBe(1);

    const other = await startFresh({ body, session_key: 'scope-b' });
    expectFailure(other, { code: 'provider_idempotency_conflict', remote_status: 409, provider_code: 'idempotency_key_conflict', operation: 'run_start' });
    expect(h.sim.startCount()).toBe(1);
  });

  it('stop on a finished run returns completed with the status object', async () => {
    const h = await harness(later);
    const runId = await h.startRun({ input: 'hi', sim_script: script.quick('All done') });
    await waitForStatus(h, runId, 'completed');
    const result = await stop(h, runId);
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    expect(result.output).toMatchObject({ object: 'hermes.run', run_id: runId, status: 'completed', output: 'All done' });
  });

  it('after a restart a non-terminal run reads interrupted and stop is a conflict (run_not_active)', async () => {
    const h = await harness(later);
    const live = await h.startRun({ input: 'hi', sim_script: script.long() });
    const done = await h.startRun({ input: 'hi', sim_script: script.quick() });
    await waitForStatus(h, live, 'running');
    await waitForStatus(h, done, 'completed');
    await restart(h);

    const read = await status(h, live);
    expect(read.status, JSON.stringify(read.error)).toBe('completed');
    expect(read.output).toMatchObject({ run_id: live, status: 'interrupted' });
    expect(typeof (read.output as { error?: unknown }).error).toBe('string');

    const kept = await status(h, done);
    expect(kept.status).toBe('completed');
    expect(kept.output).toMatchObject({ run_id: done, status: 'completed' });

    expectFailure(await stop(h, live), { code: 'conflict', remote_status: 409, provider_code: 'run_not_active', operation: 'run_stop' });
  });
});

describe('v0.19 profile (Hermes 0.19.0)', () => {
  const v019: HarnessOptions = { simulator: { profile: 'v0.19', toolInterruptLagMs: 300 } };
  const slowTool = [
    { type: 'tool', tool: 'terminal', preview: 'sleep 30', runMs: 30_000 },
    { type: 'complete', output: 'late' },
  ];

  it('the 202 body has no replayed field', async () => {
    const h = await harness(v019);
    const result = await start(h, { input: 'hi', sim_script: script.quick() }, nextId('key'));
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    expect(result.output).toEqual({ run_id: expect.stringMatching(RUN_ID), status: 'started' });
  });

  it('a stop during a tool: stopping, then the tool fails and the run is cancelled', async () => {
    const h = await harness(v019);
    const runId = await h.startRun({ input: 'hi', sim_script: slowTool });
    let stopped: Promise<AipActionResult> | undefined;
    const read = await h.invoke(
      { capability_id: h.cap('run_events'), input: { run_id: runId } },
      { onChunk: (chunk) => void (chunk.kind === 'tool' && stopped === undefined && (stopped = stop(h, runId))) },
    );
    const answer = await stopped;
    expect(answer?.status, JSON.stringify(answer?.error)).toBe('completed');
    expect(answer?.output).toEqual({ run_id: runId, status: 'stopping' });
    expect(read.status, JSON.stringify(read.error)).toBe('cancelled');
    const output = read.output as { events: Array<{ event: string; data: Record<string, unknown> }> };
    expect(output.events.map((event) => event.event)).toEqual(['tool.started', 'tool.completed', 'run.cancelled']);
    expect(output.events[1]?.data).toMatchObject({ error: true });
    expect((await status(h, runId)).output).toMatchObject({ status: 'cancelled', last_event: 'run.cancelled' });
  });

  it('run_status reads stopping until the interrupted tool has ended', async () => {
    const h = await harness(v019);
    const runId = await h.startRun({ input: 'hi', sim_script: slowTool });
    await waitForStatus(h, runId, 'running');
    expect((await stop(h, runId)).output).toEqual({ run_id: runId, status: 'stopping' });
    expect((await status(h, runId)).output).toMatchObject({ status: 'stopping', last_event: 'run.stopping' });
    await waitForStatus(h, runId, 'cancelled');
  });

  it('stop on a finished run is still not_found (unlike later)', async () => {
    const h = await harness(v019);
    const runId = await h.startRun({ input: 'hi', sim_script: script.quick() });
    await waitForStatus(h, runId, 'completed');
    expectFailure(await stop(h, runId), { code: 'not_found', remote_status: 404, provider_code: 'run_not_found', operation: 'run_stop' });
  });

  it('the 429 gate counts live runs: a finished run with an unread stream frees its slot, a run waiting for approval holds it', async () => {
    const h = await harness({ simulator: { ...v019.simulator, maxConcurrentRuns: 1 } });
    const finished = await h.startRun({ input: 'hi', sim_script: script.quick() });
    await waitForStatus(h, finished, 'completed');
    const waiting = await h.startRun({ input: 'hi', sim_script: script.approval() });
    await waitForStatus(h, waiting, 'waiting_for_approval');
    const refused = await start(h, { input: 'hi', sim_script: script.quick() }, nextId('key'));
    expect(refused.error).toMatchObject({ code: `${PREFIX}rate_limited`, category: 'temporary', retryable: true, retry_after_ms: 1000 });
    expect(refused.error?.details).toMatchObject({ remote_status: 429, provider_code: 'rate_limit_exceeded' });
  });
});

describe('pin profile', () => {
  it('the 429 gate counts streams: a finished run whose stream nobody read holds its slot', async () => {
    const h = await harness({ simulator: { maxConcurrentRuns: 1 } });
    const finished = await h.startRun({ input: 'hi', sim_script: script.quick() });
    await waitForStatus(h, finished, 'completed');
    const refused = await start(h, { input: 'hi', sim_script: script.quick() }, nextId('key'));
    expect(refused.error).toMatchObject({ code: `${PREFIX}rate_limited`, retry_after_ms: 1000 });
    expect((await events(h, finished)).status).toBe('completed');
    const admitted = await start(h, { input: 'hi', sim_script: script.quick() }, nextId('key'));
    expect(admitted.status, JSON.stringify(admitted.error)).toBe('completed');
  });

  it('the 202 body has no replayed field', async () => {
    const h = await harness();
    const result = await start(h, { input: 'hi', sim_script: script.quick() }, nextId('key'));
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    expect(result.output).toEqual({ run_id: expect.stringMatching(RUN_ID), status: 'started' });
  });

  it('after a restart every run id answers not_found', async () => {
    const h = await harness();
    const done = await h.startRun({ input: 'hi', sim_script: script.quick() });
    const live = await h.startRun({ input: 'hi', sim_script: script.long() });
    await waitForStatus(h, done, 'completed');
    await restart(h);
    for (const runId of [done, live]) {
      expectFailure(await status(h, runId), { code: 'not_found', remote_status: 404, provider_code: 'run_not_found', operation: 'run_status' });
    }
    expectFailure(await stop(h, live), { code: 'not_found', remote_status: 404, provider_code: 'run_not_found', operation: 'run_stop' });
  });

  it('a second events subscription after the first ended is not_found', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: script.quick() });
    const first = await events(h, runId);
    expect(first.status, JSON.stringify(first.error)).toBe('completed');
    expect((first.output as { terminal_event: string }).terminal_event).toBe('run.completed');
    const second = await events(h, runId);
    expectFailure(second, { code: 'not_found', remote_status: 404, provider_code: 'run_not_found', operation: 'run_events' });
    // The status outlives the stream.
    const read = await status(h, runId);
    expect(read.output).toMatchObject({ run_id: runId, status: 'completed' });
  });

  it('a tenant-bound endpoint with the matching tenant succeeds', async () => {
    const h = await harness({ endpoint: { tenantId: 'tenant-a' } });
    const context: ExecutionContext = { tenantId: 'tenant-a' };
    const started = await start(h, { input: 'hi', sim_script: script.quick() }, nextId('key'), context);
    expect(started.status, JSON.stringify(started.error)).toBe('completed');
    const runId = (started.output as { run_id: string }).run_id;
    const read = await events(h, runId, context);
    expect(read.status, JSON.stringify(read.error)).toBe('completed');
    expect((read.output as { text: string }).text).toBe('Hello world');
    const requests = h.sim.requests.slice(-2);
    expect(requests.map((request) => request.headers['x-aip-tenant-id'])).toEqual(['tenant-a', 'tenant-a']);
  });
});
