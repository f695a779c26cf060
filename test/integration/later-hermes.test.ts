/**
 * The wire behaviour of Hermes after 0.19.0 (issue 24), through the built connector against the
 * simulator: `v0.20` as measured on 0.20.1, `later` as read from upstream's source.
 * (run.interrupted and 503 gateway_draining are rows of error-table.test.ts.)
 */
import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { AipActionResult, ExecutionContext } from 'aip-connector-hermes-agent';
import { readHermesIdentity } from '../../src/cli/qualify/hermes-health.js';
import { eventually, grantFor, harnessFactory, nextId, type Harness } from '../helpers/harness.js';

const PREFIX = 'connector.hermes_agent.';
const harness = harnessFactory({ simulator: { profile: 'later', streamLookupMs: 100 } });

const events = (h: Harness, runId: string) => h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } });

function approve(h: Harness, input: Record<string, unknown>, context: ExecutionContext = { approval: grantFor(input) }): Promise<AipActionResult> {
  return h.invoke({ capability_id: h.cap('run_approval'), input, idempotency_key: nextId('key') }, context);
}

interface EventsOutput {
  events: Array<{ event: string; data: Record<string, unknown> }>;
  text: string;
  terminal_event?: string;
}

async function pendingRequestId(h: Harness, runId: string): Promise<string> {
  return eventually(() => {
    const request = h.sim.run(runId)?.events.find((event) => event['event'] === 'approval.request');
    return typeof request?.['request_id'] === 'string' ? request['request_id'] : undefined;
  }, `approval.request of ${runId}`);
}

const approvalBodies = (h: Harness) => h.sim.requests.filter((request) => request.path.endsWith('/approval')).map((request) => JSON.parse(request.body));

describe('run.failed without error (a turn that ran out of iterations)', () => {
  it('is stream_failed and keeps the output and usage Hermes sent', async () => {
    const h = await harness();
    const usage = { input_tokens: 3, output_tokens: 2, total_tokens: 5 };
    const runId = await h.startRun({
      input: 'hi',
      sim_script: [
        { type: 'delta', text: 'so far' },
        { type: 'fail', output: 'so far', usage },
      ],
    });
    const result = await events(h, runId);
    expect(result.status).toBe('failed');
    expect(result.error?.code).toBe(`${PREFIX}stream_failed`);
    const output = result.output as EventsOutput;
    expect(output.terminal_event).toBe('run.failed');
    expect(output.text).toBe('so far');
    expect(output.events.at(-1)?.data).toMatchObject({ event: 'run.failed', output: 'so far', usage, completed: false });
    expect(output.events.at(-1)?.data).not.toHaveProperty('error');
  });
});

describe('new events pass through in order', () => {
  it('message.interim, subagent.*, run.steered reach events and chunks; interim text counts only when not already streamed', async () => {
    const h = await harness();
    const runId = await h.startRun({
      input: 'hi',
      sim_script: [
        { type: 'delta', text: 'Looking. ' },
        { type: 'event', event: 'message.interim', fields: { text: 'Looking. ', already_streamed: true } },
        { type: 'event', event: 'subagent.start', fields: { goal: 'count files', subagent_id: 'sa_1' } },
        { type: 'event', event: 'subagent.complete', fields: { status: 'completed', subagent_id: 'sa_1' } },
        { type: 'event', event: 'message.interim', fields: { text: 'Found 3. ', already_streamed: false } },
        { type: 'event', event: 'run.steered', fields: { accepted: true } },
        { type: 'complete', output: 'Done.' },
      ],
    });
    const result = await events(h, runId);
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    const output = result.output as EventsOutput;
    const names = output.events.map((event) => event.event);
    expect(names).toEqual([
      'message.delta',
      'message.interim',
      'subagent.start',
      'subagent.complete',
      'message.interim',
      'run.steered',
      'reasoning.available',
      'run.completed',
    ]);
    expect(output.text).toBe('Looking. Found 3. ');
    const kinds = (h.chunks.get(result.action_id) ?? []).map((chunk) => chunk.kind);
    expect(kinds).toEqual(['data', 'data', 'data', 'data', 'data', 'data', 'thought', 'done']);
  });
});

describe('run_approval request_id', () => {
  const approvalScript = [
    { type: 'approval', command: 'rm -rf ./build' },
    { type: 'tool', tool: 'terminal' },
    { type: 'complete', output: 'ok' },
  ];

  it('is forwarded when given and answers that exact request; another id answers nothing (409)', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: approvalScript });
    const requestId = await pendingRequestId(h, runId);

    const wrong = await approve(h, { run_id: runId, choice: 'deny', request_id: 'f'.repeat(32) });
    expect(wrong.error?.code).toBe(`${PREFIX}conflict`);
    expect(wrong.error?.details?.provider_code).toBe('approval_not_pending');

    const right = await approve(h, { run_id: runId, choice: 'once', request_id: requestId });
    expect(right.status, JSON.stringify(right.error)).toBe('completed');
    expect(right.output).toMatchObject({ run_id: runId, choice: 'once', resolved: 1 });
    expect(approvalBodies(h)).toEqual([
      { choice: 'deny', request_id: 'f'.repeat(32) },
      { choice: 'once', request_id: requestId },
    ]);
  });

  it('is not sent when not given', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: approvalScript });
    await pendingRequestId(h, runId);
    const result = await approve(h, { run_id: runId, choice: 'once' });
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    expect(approvalBodies(h)).toEqual([{ choice: 'once' }]);
  });

  it('is covered by the grant: a grant for the input without it does not authorize an answer naming a request', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: approvalScript });
    const requestId = await pendingRequestId(h, runId);
    const result = await approve(h, { run_id: runId, choice: 'once', request_id: requestId }, { approval: grantFor({ run_id: runId, choice: 'once' }) });
    expect(result.error?.code).toBe(`${PREFIX}approval_required`);
    expect(approvalBodies(h)).toEqual([]);
  });

  it.each([['a'.repeat(257)], [''], ['id\nwith newline']])('an invalid request_id %j is invalid_input, nothing sent', async (requestId) => {
    const h = await harness();
    const input = { run_id: `run_${'0'.repeat(32)}`, choice: 'once', request_id: requestId };
    const result = await approve(h, input);
    expect(result.error?.code).toBe(`${PREFIX}invalid_input`);
    expect(h.sim.requests).toHaveLength(0);
  });
});

describe('a later gateway shutting down', () => {
  it('interrupts a live run (run_interrupted, recorded as interrupted) and refuses new ones (draining)', async () => {
    const h = await harness();
    const runId = await h.startRun({
      input: 'hi',
      sim_script: [
        { type: 'delta', text: 'working' },
        { type: 'approval', command: 'rm -rf ./build' },
      ],
    });
    await eventually(() => h.sim.run(runId)?.status === 'waiting_for_approval' || undefined, `run ${runId} waiting`);
    h.sim.drain();
    const result = await events(h, runId);
    expect(result.error?.code).toBe(`${PREFIX}run_interrupted`);
    expect((result.output as EventsOutput).terminal_event).toBe('run.interrupted');
    expect(await h.connector.evidence(runId)).toMatchObject({ terminal_event: 'run.interrupted', last_status: 'interrupted' });
    const refused = await h.invoke({ capability_id: h.cap('run_start'), input: { body: { input: 'again' } }, idempotency_key: nextId('key') });
    expect(refused.error).toMatchObject({ code: `${PREFIX}draining`, retryable: true, retry_after_ms: 1000 });
  });
});

describe('401 from Hermes 0.20.1 on', () => {
  it('gateway_auth_failed is authentication with that provider code', async () => {
    const h = await harness({ simulator: { profile: 'v0.20' }, endpoint: { apiKey: 'hk_wrong_key_0123456789abcdef' } });
    const result = await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: `run_${'0'.repeat(32)}` } });
    expect(result.error).toMatchObject({ code: `${PREFIX}authentication`, category: 'auth', retryable: false });
    expect(result.error?.details).toMatchObject({ remote_status: 401, provider_code: 'gateway_auth_failed' });
  });
});

describe('qualification reads a source install’s /health version', () => {
  it.each([['0.0.0'], ['unknown']])('%s is recorded as reported, with a problem saying it names no release', async (version) => {
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ status: 'ok', platform: 'hermes-agent', version }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as { port: number };
      const identity = await readHermesIdentity(`http://127.0.0.1:${port}`);
      expect(identity).toMatchObject({ version, platform: 'hermes-agent', read_from: 'GET /health' });
      expect(identity.problem).toContain('installed from source');
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
