/**
 * Every row of the API doc's error table (docs: design/connector-api.md, "Outcomes"), produced
 * for real against the Hermes simulator through the built connector. Each test asserts the
 * code, category, retryable, status, uncertain_outcome, remote_status and provider_code, and
 * whether the provider was called (rows marked "no" must make zero requests).
 */
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createHermesConnector, type AipActionResult, type ApprovalGrant, type ExecutionContext } from 'aip-connector-hermes-agent';
import {
  API_KEY,
  checkedConnector,
  ENDPOINT,
  eventually,
  grantFor,
  nextId,
  script,
  harnessFactory,
  type CheckedConnector,
  type Harness,
} from '../helpers/harness.js';

const PREFIX = 'connector.hermes_agent.';
const UNKNOWN_RUN = `run_${'0'.repeat(32)}`;
const MiB = 1024 * 1024;

const harness = harnessFactory({ simulator: { streamLookupMs: 100 } });

interface Expected {
  status?: AipActionResult['status'];
  code: string;
  category: string;
  retryable: boolean;
  uncertain: boolean;
  remote_status: number | undefined;
  provider_code: string | undefined;
  /** The operation named in details; omitted for an unknown capability. */
  operation?: string;
}

/** The exact error shape, plus the universal rule that the API key never appears in a result. */
function expectError(result: AipActionResult, expected: Expected): void {
  expect(result.status, JSON.stringify(result.error)).toBe(expected.status ?? 'failed');
  const error = result.error;
  expect(error, 'error present').toBeDefined();
  expect({
    code: error?.code,
    category: error?.category,
    retryable: error?.retryable,
    uncertain: error?.details?.uncertain_outcome,
    remote_status: error?.details?.remote_status,
    provider_code: error?.details?.provider_code,
  }).toEqual({
    code: PREFIX + expected.code,
    category: expected.category,
    retryable: expected.retryable,
    uncertain: expected.uncertain,
    remote_status: expected.remote_status,
    provider_code: expected.provider_code,
  });
  if (expected.operation !== undefined) {
    expect(error?.details?.endpoint_id).toBe(ENDPOINT);
    expect(error?.details?.operation).toBe(expected.operation);
  }
  expect(JSON.stringify(result)).not.toContain(API_KEY);
}

/** A run_events failure the connector decided from the stream itself: never retryable, no provider status or code. */
function expectRunEventsFailure(result: AipActionResult, code: string, category = 'connector'): void {
  expectError(result, { code, category, retryable: false, uncertain: false, remote_status: undefined, provider_code: undefined, operation: 'run_events' });
}

/** Runs `call` and returns its result with the number of requests the simulator received meanwhile. */
async function counted(h: Harness, call: () => Promise<AipActionResult>): Promise<{ result: AipActionResult; requests: number }> {
  const before = h.sim.requests.length;
  const result = await call();
  return { result, requests: h.sim.requests.length - before };
}

const key = () => nextId('key');

/** run_approval with an idempotency key; `approval` null means no grant at all, undefined a valid grant for the input. */
function invokeApproval(h: Harness, input: Record<string, unknown>, approval?: ApprovalGrant | null) {
  const context: ExecutionContext = approval === null ? {} : { approval: approval ?? grantFor(input) };
  return h.invoke({ capability_id: h.cap('run_approval'), input, idempotency_key: key() }, context);
}

/** run_stop with an idempotency key; `approval` null means no grant at all, undefined a valid grant for the input. */
function invokeStop(h: Harness, runId: string, approval?: ApprovalGrant | null) {
  const input = { run_id: runId };
  const context: ExecutionContext = approval === null ? {} : { approval: approval ?? grantFor(input) };
  return h.invoke({ capability_id: h.cap('run_stop'), input, idempotency_key: key() }, context);
}

const status = (h: Harness, runId: string, context?: ExecutionContext) => h.invoke({ capability_id: h.cap('run_status'), input: { run_id: runId } }, context);
const start = (h: CheckedConnector, body: Record<string, unknown>, context?: ExecutionContext, idempotencyKey: string = key()) =>
  h.invoke({ capability_id: h.cap('run_start'), input: { body }, idempotency_key: idempotencyKey }, context);

async function waitForStatus(h: Harness, runId: string, wanted: string): Promise<void> {
  await eventually(() => h.sim.run(runId)?.status === wanted || undefined, `run ${runId} ${wanted} (now ${h.sim.run(runId)?.status})`);
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
  return port;
}

describe('invalid_input (permanent, provider not called)', () => {
  const invalid = (operation: string): Expected => ({
    code: 'invalid_input',
    category: 'permanent',
    retryable: false,
    uncertain: false,
    remote_status: undefined,
    provider_code: undefined,
    operation,
  });

  it('input failing its schema', async () => {
    const h = await harness();
    const a = await counted(h, () => h.invoke({ capability_id: h.cap('run_status'), input: { run_id: 42 } }));
    expectError(a.result, invalid('run_status'));
    expect(a.requests).toBe(0);
    const b = await counted(h, () => start(h, { input: '' }));
    expectError(b.result, invalid('run_start'));
    expect(b.requests).toBe(0);
  });

  it.each([['..'], ['.'], ['a\nb'], ['']])('bad run_id %j', async (runId) => {
    const h = await harness();
    const { result, requests } = await counted(h, () => status(h, runId));
    expectError(result, invalid('run_status'));
    expect(requests).toBe(0);
  });

  it('bad header value: session_key with a non-ASCII character', async () => {
    const h = await harness();
    const { result, requests } = await counted(h, () =>
      h.invoke({ capability_id: h.cap('run_start'), input: { body: { input: 'hi' }, session_key: 'sessión' }, idempotency_key: key() }),
    );
    expectError(result, invalid('run_start'));
    expect(requests).toBe(0);
  });

  it('bad header value: context.traceId with CR LF (the value is not echoed)', async () => {
    const h = await harness();
    const { result, requests } = await counted(h, () => status(h, UNKNOWN_RUN, { traceId: 'trace-1\r\nX-Injected: evil' }));
    expectError(result, invalid('run_status'));
    expect(requests).toBe(0);
    expect(JSON.stringify(result)).not.toContain('X-Injected');
    const start2 = await counted(h, () => start(h, { input: 'hi' }, { traceId: 'trace-1\r\nX-Injected: evil' }));
    expectError(start2.result, invalid('run_start'));
    expect(start2.requests).toBe(0);
  });
});

describe('unsupported_capability (permanent, provider not called)', () => {
  const unsupported: Expected = {
    code: 'unsupported_capability',
    category: 'permanent',
    retryable: false,
    uncertain: false,
    remote_status: undefined,
    provider_code: undefined,
  };

  it.each([
    ['unknown operation', `cap:hermes_agent:${ENDPOINT}:run_delete`],
    ['unknown endpoint', 'cap:hermes_agent:elsewhere:run_status'],
    ['garbage id', 'not a capability id'],
  ])('%s', async (_, capabilityId) => {
    const h = await harness();
    const { result, requests } = await counted(h, () => h.invoke({ capability_id: capabilityId, input: { run_id: UNKNOWN_RUN }, idempotency_key: key() }));
    expectError(result, unsupported);
    expect(requests).toBe(0);
  });
});

describe('idempotency_key_required (permanent, provider not called)', () => {
  const required = (operation: string): Expected => ({
    code: 'idempotency_key_required',
    category: 'permanent',
    retryable: false,
    uncertain: false,
    remote_status: undefined,
    provider_code: undefined,
    operation,
  });

  it.each([[undefined], ['']])('start, approval and stop with idempotency_key %j', async (idempotencyKey) => {
    const h = await harness();
    const withKey = idempotencyKey === undefined ? {} : { idempotency_key: idempotencyKey };
    const a = await counted(h, () => h.invoke({ capability_id: h.cap('run_start'), input: { body: { input: 'hi' } }, ...withKey }));
    expectError(a.result, required('run_start'));
    expect(a.requests).toBe(0);

    const approvalInput = { run_id: UNKNOWN_RUN, choice: 'once' };
    const b = await counted(h, () =>
      h.invoke({ capability_id: h.cap('run_approval'), input: approvalInput, ...withKey }, { approval: grantFor(approvalInput) }),
    );
    expectError(b.result, required('run_approval'));
    expect(b.requests).toBe(0);

    const stopInput = { run_id: UNKNOWN_RUN };
    const c = await counted(h, () => h.invoke({ capability_id: h.cap('run_stop'), input: stopInput, ...withKey }, { approval: grantFor(stopInput) }));
    expectError(c.result, required('run_stop'));
    expect(c.requests).toBe(0);
  });
});

describe('approval_required (policy, provider not called)', () => {
  const refused = (operation: string): Expected => ({
    code: 'approval_required',
    category: 'policy',
    retryable: false,
    uncertain: false,
    remote_status: undefined,
    provider_code: undefined,
    operation,
  });
  const cases = ['missing', 'denied', 'expired', 'valid for longer than 15 minutes', 'empty reason', 'snapshot differs from the input'] as const;

  /** A grant for `input` that fails for exactly the named reason. */
  function badGrant(reason: (typeof cases)[number], input: Record<string, unknown>): ApprovalGrant | null {
    const now = Date.now();
    switch (reason) {
      case 'missing':
        return null;
      case 'denied':
        return grantFor(input, { decision: 'denied' });
      case 'expired':
        return grantFor(input, { grantedAt: now - 120_000, expiresAt: now - 60_000 });
      case 'valid for longer than 15 minutes':
        return grantFor(input, { grantedAt: now - 1000, expiresAt: now - 1000 + 15 * 60_000 + 1 });
      case 'empty reason':
        return grantFor(input, { evidence: { reason: '', inputSnapshot: input, policyDecision: { outcome: 'allow' } } });
      case 'snapshot differs from the input':
        return grantFor({ ...input, run_id: 'run_someone_else' });
    }
  }

  it('a well-formed grant passes the gate (control: the provider is called)', async () => {
    const h = await harness();
    const input = { run_id: UNKNOWN_RUN, choice: 'once' };
    const { result, requests } = await counted(h, () => invokeApproval(h, input, grantFor(input)));
    expect(result.error?.code).toBe(`${PREFIX}not_found`);
    expect(requests).toBe(1);
  });

  it.each(cases)('run_approval, grant %s', async (reason) => {
    const h = await harness();
    const input = { run_id: UNKNOWN_RUN, choice: 'once' };
    const { result, requests } = await counted(h, () => invokeApproval(h, input, badGrant(reason, input)));
    expectError(result, refused('run_approval'));
    expect(requests).toBe(0);
  });

  it.each(cases)('run_stop, grant %s', async (reason) => {
    const h = await harness();
    const { result, requests } = await counted(h, () => invokeStop(h, UNKNOWN_RUN, badGrant(reason, { run_id: UNKNOWN_RUN })));
    expectError(result, refused('run_stop'));
    expect(requests).toBe(0);
  });
});

describe('tenant_mismatch (auth, provider not called)', () => {
  const mismatch = (operation: string): Expected => ({
    code: 'tenant_mismatch',
    category: 'auth',
    retryable: false,
    uncertain: false,
    remote_status: undefined,
    provider_code: undefined,
    operation,
  });

  it.each([
    ['context has no tenant', {}],
    ['context has another tenant', { tenantId: 'tenant-b' }],
  ])('%s', async (_, context: ExecutionContext) => {
    const h = await harness({ endpoint: { tenantId: 'tenant-a' } });
    const a = await counted(h, () => start(h, { input: 'hi' }, context));
    expectError(a.result, mismatch('run_start'));
    expect(a.requests).toBe(0);
    const b = await counted(h, () => status(h, UNKNOWN_RUN, context));
    expectError(b.result, mismatch('run_status'));
    expect(b.requests).toBe(0);
  });
});

describe('missing_credential (auth, provider not called)', () => {
  it('endpoint without apiKey', async () => {
    const h = await harness({ endpoint: { apiKey: undefined } });
    const a = await counted(h, () => start(h, { input: 'hi' }));
    expectError(a.result, {
      code: 'missing_credential',
      category: 'auth',
      retryable: false,
      uncertain: false,
      remote_status: undefined,
      provider_code: undefined,
      operation: 'run_start',
    });
    expect(a.requests).toBe(0);
    const b = await counted(h, () => status(h, UNKNOWN_RUN));
    expectError(b.result, {
      code: 'missing_credential',
      category: 'auth',
      retryable: false,
      uncertain: false,
      remote_status: undefined,
      provider_code: undefined,
      operation: 'run_status',
    });
    expect(b.requests).toBe(0);
  });
});

describe('deadline_exceeded (temporary)', () => {
  it('deadline already passed: no request', async () => {
    const h = await harness();
    const a = await counted(h, () => start(h, { input: 'hi' }, { deadline: Date.now() - 1 }));
    expectError(a.result, {
      code: 'deadline_exceeded',
      category: 'temporary',
      retryable: false,
      uncertain: false,
      remote_status: undefined,
      provider_code: undefined,
      operation: 'run_start',
    });
    expect(a.requests).toBe(0);
    const b = await counted(h, () => status(h, UNKNOWN_RUN, { deadline: Date.now() - 1 }));
    expectError(b.result, {
      code: 'deadline_exceeded',
      category: 'temporary',
      retryable: false,
      uncertain: false,
      remote_status: undefined,
      provider_code: undefined,
      operation: 'run_status',
    });
    expect(b.requests).toBe(0);
  });

  it('deadline passing during a run_events stream: failed with the partial output', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: script.long() });
    const { result, requests } = await counted(h, () =>
      h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } }, { deadline: Date.now() + 300 }),
    );
    expectError(result, {
      code: 'deadline_exceeded',
      category: 'temporary',
      retryable: false,
      uncertain: false,
      remote_status: 200,
      provider_code: undefined,
      operation: 'run_events',
    });
    expect(requests).toBe(1);
    const output = result.output as { http_status: number; events: Array<{ event: string }>; text: string; terminal: boolean };
    expect(output.http_status).toBe(200);
    expect(output.events.map((event) => event.event)).toEqual(['message.delta']);
    expect(output.text).toBe('working');
    expect(output.terminal).toBe(false);
    expect(h.chunks.get(result.action_id)?.at(-1)?.kind).toBe('error');
  });
});

describe('cancelled (temporary, status cancelled)', () => {
  it('signal already aborted: status cancelled, no request', async () => {
    const h = await harness();
    const signal = AbortSignal.abort();
    const a = await counted(h, () => start(h, { input: 'hi' }, { signal }));
    expectError(a.result, {
      status: 'cancelled',
      code: 'cancelled',
      category: 'temporary',
      retryable: false,
      uncertain: false,
      remote_status: undefined,
      provider_code: undefined,
      operation: 'run_start',
    });
    expect(a.requests).toBe(0);
    const b = await counted(h, () => status(h, UNKNOWN_RUN, { signal }));
    expectError(b.result, {
      status: 'cancelled',
      code: 'cancelled',
      category: 'temporary',
      retryable: false,
      uncertain: false,
      remote_status: undefined,
      provider_code: undefined,
      operation: 'run_status',
    });
    expect(b.requests).toBe(0);
  });

  it('aborted during a run_events stream: cancelled, and the simulator sees the subscriber go', async () => {
    const h = await harness({ simulator: { maxConcurrentRuns: 1 } });
    const runId = await h.startRun({ input: 'hi', sim_script: script.long() });
    const controller = new AbortController();
    const { result, requests } = await counted(h, () =>
      h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } }, { signal: controller.signal, onChunk: () => controller.abort() }),
    );
    expectError(result, {
      status: 'cancelled',
      code: 'cancelled',
      category: 'temporary',
      retryable: false,
      uncertain: false,
      remote_status: 200,
      provider_code: undefined,
      operation: 'run_events',
    });
    expect(requests).toBe(1);
    expect((result.output as { events: unknown[] }).events).toHaveLength(1);
    const chunks = h.chunks.get(result.action_id) ?? [];
    expect(chunks.map((chunk) => chunk.kind)).toEqual(['data', 'error']);
    // The run's stream held the only concurrency slot; it is released once Hermes sees the subscriber disconnect.
    await eventually(
      async () => (await start(h, { input: 'again', sim_script: script.quick() })).status === 'completed' || undefined,
      'the slot to be released',
    );
    expect(h.sim.run(runId)?.status).toBe('running');
  });
});

describe('authentication (auth, provider called)', () => {
  it('a wrong key: 401 invalid_api_key, and the key is not echoed', async () => {
    const wrongKey = 'hk_wrong_secret_key_9876543210';
    const h = await harness({ endpoint: { apiKey: wrongKey } });
    const { result, requests } = await counted(h, () => status(h, UNKNOWN_RUN));
    expectError(result, {
      code: 'authentication',
      category: 'auth',
      retryable: false,
      uncertain: false,
      remote_status: 401,
      provider_code: 'invalid_api_key',
      operation: 'run_status',
    });
    expect(requests).toBe(1);
    expect(JSON.stringify(result)).not.toContain(wrongKey);
    expect(JSON.stringify(result)).not.toContain('Invalid API key');
    const b = await counted(h, () => start(h, { input: 'hi' }));
    expectError(b.result, {
      code: 'authentication',
      category: 'auth',
      retryable: false,
      uncertain: false,
      remote_status: 401,
      provider_code: 'invalid_api_key',
      operation: 'run_start',
    });
    expect(b.requests).toBe(1);
    expect(JSON.stringify(b.result)).not.toContain(wrongKey);
  });

  it('a 403', async () => {
    const h = await harness();
    h.sim.injectFault({
      route: 'status',
      response: {
        status: 403,
        body: JSON.stringify({ error: { message: 'Forbidden by policy xyz', type: 'permission_error', param: null, code: 'forbidden' } }),
      },
    });
    const { result, requests } = await counted(h, () => status(h, UNKNOWN_RUN));
    expectError(result, {
      code: 'authentication',
      category: 'auth',
      retryable: false,
      uncertain: false,
      remote_status: 403,
      provider_code: 'forbidden',
      operation: 'run_status',
    });
    expect(requests).toBe(1);
    expect(JSON.stringify(result)).not.toContain('Forbidden by policy xyz');
  });
});

describe('not_found (permanent, provider called)', () => {
  it('unknown run: 404 run_not_found, without the provider message', async () => {
    const h = await harness();
    const { result, requests } = await counted(h, () => status(h, UNKNOWN_RUN));
    expectError(result, {
      code: 'not_found',
      category: 'permanent',
      retryable: false,
      uncertain: false,
      remote_status: 404,
      provider_code: 'run_not_found',
      operation: 'run_status',
    });
    expect(requests).toBe(1);
    expect(JSON.stringify(result)).not.toContain('Run not found');
  });

  it('stop of a finished run (pin)', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: script.quick() });
    await waitForStatus(h, runId, 'completed');
    const { result, requests } = await counted(h, () => invokeStop(h, runId));
    expectError(result, {
      code: 'not_found',
      category: 'permanent',
      retryable: false,
      uncertain: false,
      remote_status: 404,
      provider_code: 'run_not_found',
      operation: 'run_stop',
    });
    expect(requests).toBe(1);
    expect(JSON.stringify(result)).not.toContain('Run not found');
  });
});

describe('provider_idempotency_conflict (permanent, provider called)', () => {
  it('a start whose derived key Hermes holds for another body (a connector with another ledger used it): idempotency_key_conflict', async () => {
    const h = await harness({ simulator: { profile: 'v0.22' } });
    const shared = key();
    expect((await start(h, { input: 'first body', sim_script: script.quick() }, undefined, shared)).status).toBe('completed');
    // Another connector (its own ledger, the same endpoint id and key): its ledger knows nothing, Hermes does.
    const other = checkedConnector(createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: h.sim.url, apiKey: API_KEY }] }));
    try {
      const { result, requests } = await counted(h, () => start(other, { input: 'another body', sim_script: script.quick() }, undefined, shared));
      expectError(result, {
        code: 'provider_idempotency_conflict',
        category: 'permanent',
        retryable: false,
        uncertain: false,
        remote_status: 409,
        provider_code: 'idempotency_key_conflict',
        operation: 'run_start',
      });
      expect(h.sim.startCount()).toBe(1);
      expect(requests).toBe(1);
      expect(JSON.stringify(result)).not.toContain('different request payload');
    } finally {
      await other.connector.close();
    }
  });
});

describe('conflict (permanent, provider called)', () => {
  it('approval with nothing pending: approval_not_pending', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: script.long() });
    await waitForStatus(h, runId, 'running');
    const { result, requests } = await counted(h, () => invokeApproval(h, { run_id: runId, choice: 'once' }));
    expectError(result, {
      code: 'conflict',
      category: 'permanent',
      retryable: false,
      uncertain: false,
      remote_status: 409,
      provider_code: 'approval_not_pending',
      operation: 'run_approval',
    });
    expect(requests).toBe(1);
    expect(JSON.stringify(result)).not.toContain('Run has no pending approval');
  });

  it('approval after the run ended: approval_not_active', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: script.quick() });
    await waitForStatus(h, runId, 'completed');
    const { result, requests } = await counted(h, () => invokeApproval(h, { run_id: runId, choice: 'deny' }));
    expectError(result, {
      code: 'conflict',
      category: 'permanent',
      retryable: false,
      uncertain: false,
      remote_status: 409,
      provider_code: 'approval_not_active',
      operation: 'run_approval',
    });
    expect(requests).toBe(1);
  });
});

describe('rate_limited (temporary, retryable)', () => {
  it('the concurrency gate is full: 429 with Retry-After 1', async () => {
    const h = await harness({ simulator: { maxConcurrentRuns: 1 } });
    await h.startRun({ input: 'hi', sim_script: script.long() }); // its unread stream holds the only slot
    const { result, requests } = await counted(h, () => start(h, { input: 'second' }));
    expectError(result, {
      code: 'rate_limited',
      category: 'temporary',
      retryable: true,
      uncertain: false,
      remote_status: 429,
      provider_code: 'rate_limit_exceeded',
      operation: 'run_start',
    });
    expect(result.error?.retry_after_ms).toBe(1000);
    expect(requests).toBe(1);
    expect(h.sim.startCount()).toBe(1);
  });
});

describe('draining (temporary, retryable)', () => {
  it('a gateway shutting down refuses a start with 503 gateway_draining and Retry-After 1: nothing ran', async () => {
    const h = await harness({ simulator: { profile: 'v0.20' } });
    h.sim.drain();
    const { result, requests } = await counted(h, () => start(h, { input: 'hi' }));
    expectError(result, {
      code: 'draining',
      category: 'temporary',
      retryable: true,
      uncertain: false,
      remote_status: 503,
      provider_code: 'gateway_draining',
      operation: 'run_start',
    });
    expect(result.error?.retry_after_ms).toBe(1000);
    expect(requests).toBe(1);
    expect(h.sim.startCount()).toBe(0);
  });

  it('another 503 stays remote_temporary, an uncertain outcome of a start', async () => {
    const h = await harness({ simulator: { profile: 'v0.20' } });
    h.sim.injectFault({
      route: 'start',
      response: { status: 503, headers: { 'Retry-After': '1' }, body: JSON.stringify({ error: { message: 'busy', code: 'upstream_unavailable' } }) },
    });
    const { result } = await counted(h, () => start(h, { input: 'hi' }));
    expectError(result, {
      code: 'remote_temporary',
      category: 'temporary',
      retryable: false,
      uncertain: true,
      remote_status: 503,
      provider_code: 'upstream_unavailable',
      operation: 'run_start',
    });
  });
});

describe('remote_rejected (permanent, provider called)', () => {
  it('413 for a body over 10,000,000 bytes', async () => {
    const h = await harness({ connector: { limits: { maxRequestBodyBytes: 12 * MiB } } });
    const { result, requests } = await counted(h, () => start(h, { input: 'x'.repeat(10_000_100) }));
    expectError(result, {
      code: 'remote_rejected',
      category: 'permanent',
      retryable: false,
      uncertain: false,
      remote_status: 413,
      provider_code: 'body_too_large',
      operation: 'run_start',
    });
    expect(requests).toBe(1);
    expect(h.sim.startCount()).toBe(0);
  });

  it('a 3xx is not followed', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: script.quick() });
    h.sim.injectFault({ route: 'status', response: { status: 302, headers: { Location: `${h.sim.url}/v1/runs/${runId}` } } });
    const { result, requests } = await counted(h, () => status(h, UNKNOWN_RUN));
    expectError(result, {
      code: 'remote_rejected',
      category: 'permanent',
      retryable: false,
      uncertain: false,
      remote_status: 302,
      provider_code: undefined,
      operation: 'run_status',
    });
    expect(requests).toBe(1);
    expect(h.sim.requests.at(-1)?.path).toBe(`/v1/runs/${UNKNOWN_RUN}`);
  });

  it('a 422', async () => {
    const h = await harness();
    h.sim.injectFault({
      route: 'start',
      response: {
        status: 422,
        body: JSON.stringify({ error: { message: 'secret validation detail', type: 'invalid_request_error', param: null, code: 'unprocessable_input' } }),
      },
    });
    const { result, requests } = await counted(h, () => start(h, { input: 'hi' }));
    expectError(result, {
      code: 'remote_rejected',
      category: 'permanent',
      retryable: false,
      uncertain: false,
      remote_status: 422,
      provider_code: 'unprocessable_input',
      operation: 'run_start',
    });
    expect(requests).toBe(1);
    expect(JSON.stringify(result)).not.toContain('secret validation detail');
  });
});

describe('remote_temporary (temporary, provider called)', () => {
  const body = JSON.stringify({ error: { message: 'Traceback: provider exploded', type: 'server_error', param: null, code: 'internal_error' } });

  it.each([[500], [503]])('%i on run_status: retryable, outcome known', async (code) => {
    const h = await harness();
    h.sim.injectFault({ route: 'status', response: { status: code, body } });
    const { result, requests } = await counted(h, () => status(h, UNKNOWN_RUN));
    expectError(result, {
      code: 'remote_temporary',
      category: 'temporary',
      retryable: true,
      uncertain: false,
      remote_status: code,
      provider_code: 'internal_error',
      operation: 'run_status',
    });
    expect(requests).toBe(1);
    expect(JSON.stringify(result)).not.toContain('provider exploded');
  });

  it.each([[500], [503]])('%i on run_start, run_approval, run_stop: uncertain outcome, not retryable', async (code) => {
    const h = await harness();
    h.sim.injectFault({ route: 'start', response: { status: code, body } });
    h.sim.injectFault({ route: 'approval', response: { status: code, body } });
    h.sim.injectFault({ route: 'stop', response: { status: code, body } });
    const a = await counted(h, () => start(h, { input: 'hi' }));
    expectError(a.result, {
      code: 'remote_temporary',
      category: 'temporary',
      retryable: false,
      uncertain: true,
      remote_status: code,
      provider_code: 'internal_error',
      operation: 'run_start',
    });
    expect(a.requests).toBe(1);
    const b = await counted(h, () => invokeApproval(h, { run_id: UNKNOWN_RUN, choice: 'once' }));
    expectError(b.result, {
      code: 'remote_temporary',
      category: 'temporary',
      retryable: false,
      uncertain: true,
      remote_status: code,
      provider_code: 'internal_error',
      operation: 'run_approval',
    });
    expect(b.requests).toBe(1);
    const c = await counted(h, () => invokeStop(h, UNKNOWN_RUN));
    expectError(c.result, {
      code: 'remote_temporary',
      category: 'temporary',
      retryable: false,
      uncertain: true,
      remote_status: code,
      provider_code: 'internal_error',
      operation: 'run_stop',
    });
    expect(c.requests).toBe(1);
  });
});

describe('transport (transport)', () => {
  it('connection destroyed on run_status: retryable', async () => {
    const h = await harness();
    h.sim.injectFault({ route: 'status', destroy: true });
    const { result, requests } = await counted(h, () => status(h, UNKNOWN_RUN));
    expectError(result, {
      code: 'transport',
      category: 'transport',
      retryable: true,
      uncertain: false,
      remote_status: undefined,
      provider_code: undefined,
      operation: 'run_status',
    });
    expect(requests).toBe(1);
  });

  it('connection destroyed on run_start: uncertain outcome', async () => {
    const h = await harness();
    h.sim.injectFault({ route: 'start', destroy: true });
    const { result, requests } = await counted(h, () => start(h, { input: 'hi' }));
    expectError(result, {
      code: 'transport',
      category: 'transport',
      retryable: false,
      uncertain: true,
      remote_status: undefined,
      provider_code: undefined,
      operation: 'run_start',
    });
    // The start is not sent again: the connector only read whether this endpoint declares durable run idempotency (it does not).
    expect(requests).toBe(2);
    expect(h.sim.requests.slice(-2).map((request) => `${request.method} ${request.path}`)).toEqual(['POST /v1/runs', 'GET /v1/capabilities']);
  });

  it('connection refused: nothing was sent, so not uncertain even for run_start', async () => {
    const port = await closedPort();
    const h = await harness({ endpoint: { baseUrl: `http://127.0.0.1:${port}` } });
    const { result, requests } = await counted(h, () => start(h, { input: 'hi' }));
    expectError(result, {
      code: 'transport',
      category: 'transport',
      retryable: false,
      uncertain: false,
      remote_status: undefined,
      provider_code: undefined,
      operation: 'run_start',
    });
    expect(requests).toBe(0);
    const b = await status(h, UNKNOWN_RUN);
    expectError(b, {
      code: 'transport',
      category: 'transport',
      retryable: true,
      uncertain: false,
      remote_status: undefined,
      provider_code: undefined,
      operation: 'run_status',
    });
  });
});

describe('invalid_response (connector, provider called)', () => {
  it('a 200 JSON route answered with text/html', async () => {
    const h = await harness();
    h.sim.injectFault({
      route: 'status',
      response: { status: 200, headers: { 'Content-Type': 'text/html; charset=utf-8' }, body: '<html>provider login page</html>' },
    });
    const { result, requests } = await counted(h, () => status(h, UNKNOWN_RUN));
    expectError(result, {
      code: 'invalid_response',
      category: 'connector',
      retryable: false,
      uncertain: false,
      remote_status: 200,
      provider_code: undefined,
      operation: 'run_status',
    });
    expect(requests).toBe(1);
    expect(JSON.stringify(result)).not.toContain('provider login page');
  });

  it('a body over limits.maxJsonResponseBytes', async () => {
    const h = await harness({ connector: { limits: { maxJsonResponseBytes: 100 } } });
    const runId = await h.startRun({ input: 'hi', sim_script: script.quick() });
    const { result, requests } = await counted(h, () => status(h, runId));
    expectError(result, {
      code: 'invalid_response',
      category: 'connector',
      retryable: false,
      uncertain: false,
      remote_status: 200,
      provider_code: undefined,
      operation: 'run_status',
    });
    expect(requests).toBe(1);
    expect(result.output).toBeUndefined();
  });

  it('malformed JSON', async () => {
    const h = await harness();
    h.sim.injectFault({ route: 'status', response: { status: 200, body: '{"run_id": "run_1", "status": ' } });
    const { result, requests } = await counted(h, () => status(h, UNKNOWN_RUN));
    expectError(result, {
      code: 'invalid_response',
      category: 'connector',
      retryable: false,
      uncertain: false,
      remote_status: 200,
      provider_code: undefined,
      operation: 'run_status',
    });
    expect(requests).toBe(1);
  });

  it('a 202 without run_id on run_start: uncertain outcome', async () => {
    const h = await harness();
    h.sim.injectFault({ route: 'start', response: { status: 202, body: '{"status": "started"}' } });
    const { result, requests } = await counted(h, () => start(h, { input: 'hi' }));
    expectError(result, {
      code: 'invalid_response',
      category: 'connector',
      retryable: false,
      uncertain: true,
      remote_status: 202,
      provider_code: undefined,
      operation: 'run_start',
    });
    expect(requests).toBe(1);
    expect(result.output).toBeUndefined();
  });
});

describe('stream outcomes (connector)', () => {
  it('stream_failed: run.failed', async () => {
    const h = await harness();
    const runId = await h.startRun({
      input: 'hi',
      sim_script: [
        { type: 'delta', text: 'partial' },
        { type: 'fail', error: 'model provider refused' },
      ],
    });
    const { result, requests } = await counted(h, () => h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } }));
    expectRunEventsFailure(result, 'stream_failed');
    expect(requests).toBe(1);
    const output = result.output as { terminal: boolean; terminal_event: string; text: string; events: Array<{ event: string }> };
    expect(output.terminal).toBe(true);
    expect(output.terminal_event).toBe('run.failed');
    expect(output.text).toBe('partial');
    expect(output.events.map((event) => event.event)).toEqual(['message.delta', 'run.failed']);
    const chunks = h.chunks.get(result.action_id) ?? [];
    expect(chunks.map((chunk) => chunk.kind)).toEqual(['data', 'error']);
    expect(result.error?.message).not.toContain('model provider refused');
  });

  it('run_interrupted: run.interrupted (a later Hermes shut down under the run)', async () => {
    const h = await harness({ simulator: { profile: 'later' } });
    const runId = await h.startRun({ input: 'hi', sim_script: [{ type: 'delta', text: 'half' }, { type: 'interrupted' }] });
    const { result, requests } = await counted(h, () => h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } }));
    expectRunEventsFailure(result, 'run_interrupted');
    expect(requests).toBe(1);
    expect(result.error?.message).toContain('may have acted');
    const output = result.output as { terminal: boolean; terminal_event: string; text: string; reconciliation?: unknown };
    expect(output).toMatchObject({ terminal: true, terminal_event: 'run.interrupted', text: 'half' });
    expect(output.reconciliation).toBeUndefined();
    expect((h.chunks.get(result.action_id) ?? []).map((chunk) => chunk.kind)).toEqual(['data', 'error']);
    const evidence = await h.connector.evidence(runId);
    expect(evidence).toMatchObject({ run_id: runId, terminal_event: 'run.interrupted', last_status: 'interrupted' });
  });

  it('stream_truncated: max_events reached', async () => {
    const h = await harness();
    const steps = [1, 2, 3, 4, 5].map((n) => ({ type: 'delta', text: `d${n} ` }));
    const runId = await h.startRun({ input: 'hi', sim_script: [...steps, { type: 'complete', output: 'done' }] });
    const { result, requests } = await counted(h, () => h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId, max_events: 2 } }));
    expectRunEventsFailure(result, 'stream_truncated');
    expect(requests).toBe(1);
    const output = result.output as { truncated: boolean; terminal: boolean; events: unknown[]; text: string };
    expect(output.truncated).toBe(true);
    expect(output.terminal).toBe(false);
    expect(output.events).toHaveLength(2);
    expect(output.text).toBe('d1 d2 ');
    const chunks = h.chunks.get(result.action_id) ?? [];
    expect(chunks.map((chunk) => chunk.kind)).toEqual(['data', 'data', 'error']);
    expect((chunks[2]?.data as { code?: string }).code).toBe(`${PREFIX}stream_truncated`);
  });

  it('stream_incomplete: the stream is cut, the status is read for reconciliation', async () => {
    const h = await harness();
    const runId = await h.startRun({
      input: 'hi',
      sim_script: [
        { type: 'delta', text: 'before' },
        { type: 'approval', command: 'ls' },
        { type: 'cut' },
        { type: 'sleep', ms: 60_000 },
        { type: 'complete' },
      ],
    });
    // The cut must reach a live subscriber: the script waits at its approval until the reader has seen it.
    const onChunk: ExecutionContext['onChunk'] = async (chunk) => {
      if (chunk.kind !== 'pending_approval') return;
      const answer = await invokeApproval(h, { run_id: runId, choice: 'once' });
      expect(answer.status).toBe('completed');
    };
    const before = h.sim.requests.length;
    const result = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } }, { onChunk });
    expectRunEventsFailure(result, 'stream_incomplete');
    // events, the approval, and the reconciliation read
    expect(h.sim.requests.slice(before).map((request) => `${request.method} ${request.path}`)).toEqual([
      `GET /v1/runs/${runId}/events`,
      `POST /v1/runs/${runId}/approval`,
      `GET /v1/runs/${runId}`,
    ]);
    const output = result.output as { terminal: boolean; reconciliation: { http_status: number; status: { run_id: string; status: string } } };
    expect(output.terminal).toBe(false);
    expect(output.reconciliation.http_status).toBe(200);
    expect(output.reconciliation.status.run_id).toBe(runId);
    expect(output.reconciliation.status.status).toBe('running');
    expect(h.chunks.get(result.action_id)?.at(-1)?.kind).toBe('error');
  });
});

describe('no message or detail carries a provider body, a header value or the API key', () => {
  it('resume_unsupported: last_seq against a Hermes whose events carry no number (0.20.1)', async () => {
    const h = await harness({ simulator: { profile: 'v0.20', streamLookupMs: 100 } });
    const runId = await h.startRun({
      input: 'hi',
      sim_script: [{ type: 'delta', text: 'unnumbered' }, { type: 'approval', command: 'ls' }, { type: 'complete' }],
    });
    const { result, requests } = await counted(h, () => h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId, last_seq: 3 } }));
    expectRunEventsFailure(result, 'resume_unsupported', 'permanent');
    expect(requests).toBe(1);
    expect(result.error?.details?.['last_seq']).toBe(3);
    expect((h.chunks.get(result.action_id) ?? []).map((chunk) => chunk.kind)).toEqual(['error']);
  });

  it('injected body text and header values stay out of the result', async () => {
    const h = await harness();
    const secretBody = 'PROVIDER-SECRET-BODY-TEXT';
    const secretHeader = 'header-secret-value-123';
    for (const route of ['start', 'status', 'approval', 'stop'] as const) {
      h.sim.injectFault({
        route,
        response: {
          status: 500,
          headers: { 'X-Debug-Token': secretHeader, 'Retry-After': '7' },
          body: JSON.stringify({ error: { message: secretBody, type: 'server_error', param: null, code: secretBody.toLowerCase().replaceAll('-', '_') } }),
        },
      });
    }
    const results = [
      await start(h, { input: 'hi' }),
      await status(h, UNKNOWN_RUN),
      await invokeApproval(h, { run_id: UNKNOWN_RUN, choice: 'once' }),
      await invokeStop(h, UNKNOWN_RUN),
    ];
    for (const result of results) {
      expect(result.status).toBe('failed');
      expect(result.error?.code).toBe(`${PREFIX}remote_temporary`);
      const text = JSON.stringify(result);
      expect(text).not.toContain(secretBody);
      expect(text).not.toContain(secretHeader);
      expect(text).not.toContain(API_KEY);
    }
  });

  it('provider error messages stay out; session keys and trace ids are not echoed', async () => {
    const h = await harness();
    const sessionKey = 'session-key-value-abc';
    const traceId = 'trace-value-xyz';
    const results = [
      await status(h, UNKNOWN_RUN, { traceId }),
      await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: UNKNOWN_RUN } }, { traceId }),
      await invokeStop(h, UNKNOWN_RUN),
      await h.invoke(
        { capability_id: h.cap('run_start'), input: { body: { input: 'hi' }, session_key: `${sessionKey}\u00e9` }, idempotency_key: key() },
        { traceId },
      ),
    ];
    expect(results.map((result) => result.error?.code)).toEqual([`${PREFIX}not_found`, `${PREFIX}not_found`, `${PREFIX}not_found`, `${PREFIX}invalid_input`]);
    for (const result of results) {
      const text = JSON.stringify(result);
      expect(text).not.toContain('Run not found');
      expect(text).not.toContain(sessionKey);
      expect(text).not.toContain(traceId);
      expect(text).not.toContain(API_KEY);
    }
  });
});
