/**
 * The headers, paths and bodies the simulator actually receives (`sim.requests`), per
 * operation: exactly the set the API doc lists ("Headers sent"), values only from the
 * endpoint, the AIP envelope and the trusted context, never from `action.input`.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { ExecutionContext } from 'aip-connector-hermes-agent';
import type { RecordedRequest } from 'aip-connector-hermes-agent/simulator';
import { API_KEY, eventually, grantFor, nextId, script, harnessFactory, type Harness } from '../helpers/harness.js';
import { providerKeyOf } from '../helpers/provider-key.js';

const PREFIX = 'connector.hermes_agent.';
const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
const USER_AGENT = `aip-connector-hermes-agent/${VERSION}`;
/** Transport headers undici adds itself; everything else must be in the expected set. */
const TRANSPORT_HEADERS = new Set(['host', 'connection', 'content-length']);

const harness = harnessFactory({ simulator: { streamLookupMs: 100 } });

const DEADLINE = Date.now() + 10 * 60_000;
const TRUSTED: ExecutionContext = {
  tenantId: 'tenant-42',
  actor: { principalId: 'user:alice@example.com', issuer: 'https://issuer.example/realms/aip' },
  traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
  sessionId: 'aip-session-7',
  deadline: DEADLINE,
};
const DELEGATION_CHAIN = [
  { principal: 'agent:planner', scope: ['runs:write'], note: 'Grüße' },
  { principal: 'user:alice@example.com', issued_at: 1_700_000_000 },
];

/** The x-aip headers that the trusted context above must produce. */
function aipHeaders(withChain: boolean): Record<string, string> {
  const headers: Record<string, string> = {
    'x-aip-principal-id': 'user:alice@example.com',
    'x-aip-authentication-issuer': 'https://issuer.example/realms/aip',
    'x-aip-tenant-id': 'tenant-42',
    'x-aip-trace-id': '4bf92f3577b34da6a3ce929d0e0e4736',
    'x-aip-correlation-id': '4bf92f3577b34da6a3ce929d0e0e4736',
    'x-aip-session-id': 'aip-session-7',
    'x-aip-deadline-unix-ms': String(DEADLINE),
  };
  if (withChain) headers['x-aip-delegation-chain'] = JSON.stringify(DELEGATION_CHAIN);
  return headers;
}

function base(accept: 'application/json' | 'text/event-stream', extra: Record<string, string> = {}): Record<string, string> {
  return { authorization: `Bearer ${API_KEY}`, 'user-agent': USER_AGENT, accept, ...extra };
}

/**
 * Exactly these headers (besides host/connection/content-length). The delegation chain is
 * compared as JSON: the connector may escape non-ASCII to keep the header value ASCII.
 */
function expectHeaders(request: RecordedRequest | undefined, expected: Record<string, string>): void {
  expect(request, 'request recorded').toBeDefined();
  const headers = request?.headers ?? {};
  const names = Object.keys(headers).filter((name) => !TRANSPORT_HEADERS.has(name));
  expect(names.sort()).toEqual(Object.keys(expected).sort());
  for (const [name, value] of Object.entries(expected)) {
    if (name === 'x-aip-delegation-chain') {
      const sent = headers[name];
      expect(typeof sent).toBe('string');
      expect(sent as string).toMatch(/^[\x20-\x7e]+$/);
      expect(JSON.parse(sent as string)).toEqual(JSON.parse(value));
    } else {
      expect(headers[name], name).toBe(value);
    }
  }
  const foreign = names.filter((name) => (name.startsWith('x-aip-') || name.startsWith('x-hermes-')) && !(name in expected));
  expect(foreign).toEqual([]);
}

function expectNoBody(request: RecordedRequest | undefined): void {
  expect(request?.headers['content-type']).toBeUndefined();
  expect(request?.headers['transfer-encoding']).toBeUndefined();
  expect([undefined, '0']).toContain(request?.headers['content-length']);
  expect(request?.body).toBe('');
}

/** The requests made while `call` ran. */
async function during(h: Harness, call: () => Promise<unknown>): Promise<RecordedRequest[]> {
  const before = h.sim.requests.length;
  await call();
  return h.sim.requests.slice(before);
}

describe('headers per operation with a full trusted context', () => {
  it('run_start: body headers, Idempotency-Key, X-Hermes-Session-Key (not in the body), every X-AIP header', async () => {
    const h = await harness();
    const body = { input: 'hello', instructions: 'be brief', sim_script: script.quick() };
    const [request, ...rest] = await during(h, async () => {
      const result = await h.invoke(
        {
          capability_id: h.cap('run_start'),
          input: { body, session_key: 'memory-scope-1' },
          idempotency_key: 'idem-start-1',
          delegation_chain: DELEGATION_CHAIN,
        },
        TRUSTED,
      );
      expect(result.status, JSON.stringify(result.error)).toBe('completed');
    });
    expect(rest).toHaveLength(0);
    expect(request?.method).toBe('POST');
    expect(request?.rawPath).toBe('/v1/runs');
    expectHeaders(request, {
      ...base('application/json', {
        'content-type': 'application/json',
        'idempotency-key': providerKeyOf(h.cap('run_start'), 'idem-start-1', 'tenant-42'),
        'x-hermes-session-key': 'memory-scope-1',
      }),
      ...aipHeaders(true),
    });
    expect(request?.headers['content-length']).toBe(String(Buffer.byteLength(request?.body ?? '')));
    expect(JSON.parse(request?.body ?? '')).toEqual(body);
    expect(request?.body).not.toContain('memory-scope-1');
    expect(request?.body).not.toContain('session_key');
  });

  it('run_status: no body, no Content-Type, no Idempotency-Key without a key', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: script.quick() });
    const [request, ...rest] = await during(h, async () => {
      const result = await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: runId }, delegation_chain: DELEGATION_CHAIN }, TRUSTED);
      expect(result.status).toBe('completed');
    });
    expect(rest).toHaveLength(0);
    expect(`${request?.method} ${request?.rawPath}`).toBe(`GET /v1/runs/${runId}`);
    expectHeaders(request, { ...base('application/json'), ...aipHeaders(true) });
    expectNoBody(request);
  });

  it('run_status with an idempotency key forwards it', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: script.quick() });
    const [request] = await during(h, () =>
      h.invoke({ capability_id: h.cap('run_status'), input: { run_id: runId }, idempotency_key: 'idem-read-1' }, TRUSTED),
    );
    expectHeaders(request, {
      ...base('application/json', { 'idempotency-key': providerKeyOf(h.cap('run_status'), 'idem-read-1', 'tenant-42') }),
      ...aipHeaders(false),
    });
  });

  it('run_events: Accept text/event-stream', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: script.quick() });
    const [request, ...rest] = await during(h, async () => {
      const result = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId }, delegation_chain: DELEGATION_CHAIN }, TRUSTED);
      expect(result.status).toBe('completed');
    });
    expect(rest).toHaveLength(0);
    expect(`${request?.method} ${request?.rawPath}`).toBe(`GET /v1/runs/${runId}/events`);
    expectHeaders(request, { ...base('text/event-stream'), ...aipHeaders(true) });
    expectNoBody(request);
  });

  it('run_approval: JSON body and Idempotency-Key', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: script.approval() });
    await eventually(() => h.sim.run(runId)?.pendingApprovals === 1 || undefined, 'the approval to be pending');
    const input = { run_id: runId, choice: 'approve' };
    const [request, ...rest] = await during(h, async () => {
      const result = await h.invoke(
        { capability_id: h.cap('run_approval'), input, idempotency_key: 'idem-approval-1', delegation_chain: DELEGATION_CHAIN },
        { ...TRUSTED, approval: grantFor(input) },
      );
      expect(result.status, JSON.stringify(result.error)).toBe('completed');
      expect(result.output).toMatchObject({ run_id: runId, choice: 'once', resolved: 1 });
    });
    expect(rest).toHaveLength(0);
    expect(`${request?.method} ${request?.rawPath}`).toBe(`POST /v1/runs/${runId}/approval`);
    expectHeaders(request, {
      ...base('application/json', {
        'content-type': 'application/json',
        'idempotency-key': providerKeyOf(h.cap('run_approval'), 'idem-approval-1', 'tenant-42'),
      }),
      ...aipHeaders(true),
    });
    expect(request?.body).toBe('{"choice":"once"}');
  });

  it('run_stop: no body, Idempotency-Key', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: script.long() });
    const input = { run_id: runId };
    const [request, ...rest] = await during(h, async () => {
      const result = await h.invoke(
        { capability_id: h.cap('run_stop'), input, idempotency_key: 'idem-stop-1', delegation_chain: DELEGATION_CHAIN },
        { ...TRUSTED, approval: grantFor(input) },
      );
      expect(result.status, JSON.stringify(result.error)).toBe('completed');
    });
    expect(rest).toHaveLength(0);
    expect(`${request?.method} ${request?.rawPath}`).toBe(`POST /v1/runs/${runId}/stop`);
    expectHeaders(request, {
      ...base('application/json', { 'idempotency-key': providerKeyOf(h.cap('run_stop'), 'idem-stop-1', 'tenant-42') }),
      ...aipHeaders(true),
    });
    expectNoBody(request);
  });

  it('without a context or delegation chain: no X-AIP header at all', async () => {
    const h = await harness();
    const [request] = await during(h, () =>
      h.invoke({ capability_id: h.cap('run_start'), input: { body: { input: 'hi', sim_script: script.quick() } }, idempotency_key: 'idem-bare' }),
    );
    expectHeaders(request, base('application/json', { 'content-type': 'application/json', 'idempotency-key': providerKeyOf(h.cap('run_start'), 'idem-bare') }));
  });
});

describe('nothing in action.input sets a header, the endpoint or the URL', () => {
  const smuggled = {
    headers: { Authorization: 'Bearer evil-key', 'X-AIP-Tenant-Id': 'evil-tenant', 'X-Hermes-Session-Key': 'evil-session', 'Idempotency-Key': 'evil-idem' },
    authorization: 'Bearer evil-key',
    baseUrl: 'http://evil.invalid',
    url: 'http://evil.invalid/v1/runs',
    endpoint: 'evil',
    'X-AIP-Principal-Id': 'evil-principal',
  };

  it('run_start: the fields travel only inside the JSON body', async () => {
    const h = await harness();
    const body = { input: 'hi', sim_script: script.quick(), ...smuggled };
    const requests = await during(h, async () => {
      const result = await h.invoke(
        // Extra envelope fields on the action are not headers either.
        { capability_id: h.cap('run_start'), input: { body }, idempotency_key: 'idem-real', headers: { authorization: 'Bearer evil-key' } },
        { traceId: 'trace-real' },
      );
      expect(result.status, JSON.stringify(result.error)).toBe('completed');
    });
    expect(requests).toHaveLength(1);
    const [request] = requests;
    expect(`${request?.method} ${request?.rawPath}`).toBe('POST /v1/runs');
    expectHeaders(request, {
      ...base('application/json', { 'content-type': 'application/json', 'idempotency-key': providerKeyOf(h.cap('run_start'), 'idem-real') }),
      'x-aip-trace-id': 'trace-real',
      'x-aip-correlation-id': 'trace-real',
    });
    expect(JSON.parse(request?.body ?? '')).toEqual(body);
  });

  it('run_start: header-like fields beside body are refused', async () => {
    const h = await harness();
    const requests = await during(h, async () => {
      const result = await h.invoke({ capability_id: h.cap('run_start'), input: { body: { input: 'hi' }, ...smuggled }, idempotency_key: 'idem-x' });
      expect(result.status).toBe('failed');
      expect(result.error?.code).toBe(`${PREFIX}invalid_input`);
    });
    expect(requests).toHaveLength(0);
  });

  it.each([
    ['run_status', {}],
    ['run_events', {}],
    ['run_approval', { choice: 'once' }],
    ['run_stop', {}],
  ])('%s refuses them as invalid_input (strict schema), without a request', async (operation, extra) => {
    const h = await harness();
    for (const [field, value] of Object.entries(smuggled)) {
      const input = { run_id: `run_${'1'.repeat(32)}`, ...extra, [field]: value };
      const requests = await during(h, async () => {
        const result = await h.invoke({ capability_id: h.cap(operation), input, idempotency_key: nextId('key') }, { approval: grantFor(input) });
        expect(result.status, field).toBe('failed');
        expect(result.error?.code, field).toBe(`${PREFIX}invalid_input`);
      });
      expect(requests, field).toHaveLength(0);
    }
  });
});

describe('run_id is one percent-encoded path segment', () => {
  const ids = ['a/b c?d#e%', 'ü', '../x', 'run_ok', '%2F', 'a b+c&d=e;f', '日本'];

  it.each(ids)('run_status %j', async (runId) => {
    const h = await harness();
    const [request, ...rest] = await during(h, async () => {
      const result = await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: runId } });
      expect(result.error?.code).toBe(`${PREFIX}not_found`);
    });
    expect(rest).toHaveLength(0);
    expect(request?.rawPath).toBe(`/v1/runs/${encodeURIComponent(runId)}`);
    const segments = (request?.rawPath ?? '').split('/');
    expect(segments).toHaveLength(4);
    expect(decodeURIComponent(segments[3] ?? '')).toBe(runId);
  });

  it.each(['a/b c?d#e%', 'ü', '../x'])('run_events, run_approval and run_stop %j', async (runId) => {
    const h = await harness();
    const cases = [
      { operation: 'run_events', input: { run_id: runId }, method: 'GET', suffix: 'events' },
      { operation: 'run_approval', input: { run_id: runId, choice: 'deny' }, method: 'POST', suffix: 'approval' },
      { operation: 'run_stop', input: { run_id: runId }, method: 'POST', suffix: 'stop' },
    ];
    for (const { operation, input, method, suffix } of cases) {
      const [request, ...rest] = await during(h, async () => {
        const result = await h.invoke({ capability_id: h.cap(operation), input, idempotency_key: nextId('key') }, { approval: grantFor(input) });
        expect(result.error?.code, operation).toBe(`${PREFIX}not_found`);
      });
      expect(rest, operation).toHaveLength(0);
      expect(request?.method).toBe(method);
      expect(request?.rawPath).toBe(`/v1/runs/${encodeURIComponent(runId)}/${suffix}`);
      const segments = (request?.rawPath ?? '').split('/');
      expect(segments).toHaveLength(5);
      expect(decodeURIComponent(segments[3] ?? '')).toBe(runId);
    }
  });
});

describe('run_approval and run_stop bodies', () => {
  it.each([
    [{ choice: 'approve' }, '{"choice":"once"}'],
    [{ choice: 'allow' }, '{"choice":"once"}'],
    [{ choice: 'once' }, '{"choice":"once"}'],
    [{ choice: 'session' }, '{"choice":"session"}'],
    [{ choice: 'deny', resolve_all: true }, '{"choice":"deny","resolve_all":true}'],
    [{ choice: 'approve', resolve_all: false }, '{"choice":"once","resolve_all":false}'],
  ])('%j is sent as %s', async (fields, expectedBody) => {
    const h = await harness();
    // A finished run: Hermes reads the body before answering 409 approval_not_active.
    const runId = await h.startRun({ input: 'hi', sim_script: script.quick() });
    await eventually(() => h.sim.run(runId)?.status === 'completed' || undefined, 'the run to complete');
    const input = { run_id: runId, ...fields };
    const [request] = await during(h, async () => {
      const result = await h.invoke({ capability_id: h.cap('run_approval'), input, idempotency_key: nextId('key') }, { approval: grantFor(input) });
      expect(result.error?.details?.provider_code).toBe('approval_not_active');
    });
    expect(request?.body).toBe(expectedBody);
    expect(request?.headers['content-type']).toBe('application/json');
    expect(request?.headers['content-length']).toBe(String(Buffer.byteLength(expectedBody)));
  });

  it('run_stop sends no body', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'hi', sim_script: script.long() });
    const input = { run_id: runId };
    const [request] = await during(h, async () => {
      const result = await h.invoke({ capability_id: h.cap('run_stop'), input, idempotency_key: nextId('key') }, { approval: grantFor(input) });
      expect(result.status).toBe('completed');
    });
    expectNoBody(request);
  });
});
