/**
 * Every refusal of the message path, produced for real, with the reference host's status, code,
 * category, retryable flag and retry_after_ms, and every answer after decoding signed and
 * correlated as the central side checks it. Where two checks fail, the earlier one answers.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { REPLAY_WINDOW_MS } from '../../src/host/replay.js';
import { rfc3339 } from '../../src/host/wire/time.js';
import {
  type Answer,
  actionEnvelope,
  actionId,
  type HostUnderTest,
  HEARTBEAT_MS,
  cancelEnvelope,
  cap,
  errorOf,
  gatewayKey,
  gatewayPrincipal,
  peerResponseProblem,
  resultOf,
  routeFor,
  sentEnvelope,
  signed,
  startHost,
  strangerKey,
} from './messages-support.js';

let host: HostUnderTest;
beforeAll(async () => {
  host = await startHost();
});

const statusAction = () => ({ id: actionId(), capability_id: cap('run_status'), input: { run_id: 'run_unknown' } });

/** A signed error: status, the error object exactly, and the central checks on the envelope. */
function expectRefusal(answer: Answer, text: string, status: number, error: Record<string, unknown>): void {
  expect(answer.status).toBe(status);
  expect(answer.json.message_type).toBe('aip.core.v1.error');
  expect(errorOf(answer)).toMatchObject({ ...error, source: { component: expect.any(String) } });
  expect(peerResponseProblem(answer, sentEnvelope(text))).toBeUndefined();
}

const routeMismatch = { code: 'connector_host.route_mismatch', category: 'auth', retryable: false };

describe('400: schema and decode, unsigned', () => {
  it('{"hello":"world"} → 400 schema.envelope.invalid, a plain error object with no envelope', async () => {
    const answer = await host.post('{"hello":"world"}');
    expect(answer.status).toBe(400);
    expect(Object.keys(answer.json)).toEqual(['error']);
    expect(answer.json.error).toEqual({ code: 'schema.envelope.invalid', message: expect.any(String), category: 'permanent', retryable: false });
  });

  it('an envelope that is schema-valid but does not decode (sent_at not RFC 3339) → 400 envelope.decode.invalid, unsigned', async () => {
    const text = signed(actionEnvelope(host, statusAction()));
    const answer = await host.post(text.replace(/"sent_at":"[^"]*"/, '"sent_at":"yesterday"'));
    expect(answer.status).toBe(400);
    expect(answer.json).toEqual({ error: { code: 'envelope.decode.invalid', message: expect.any(String), category: 'permanent', retryable: false } });
  });

  it('not JSON → 400 plain text, and no JSON content type → 415, as axum’s Json extractor answers', async () => {
    expect(await host.post('{"hello":')).toMatchObject({ status: 400, contentType: expect.stringContaining('text/plain') });
    const envelope = signed(actionEnvelope(host, statusAction()));
    expect(await host.post(envelope, 'text/plain')).toMatchObject({ status: 415, body: 'Expected request with `Content-Type: application/json`' });
  });

  it('a number serde_json refuses (a signed null changed to 1e400 in transit) → 400 plain text, as the reference answers; nothing executes', async () => {
    const startAction = () => {
      const id = actionId();
      return { id, capability_id: cap('run_start'), input: { body: { input: 'hi', note: null } }, idempotency_key: `k-${id}` };
    };
    const runsBefore = host.sim.runs().length;
    for (const huge of ['1e400', '-1e400', '1.7976931348623159e308']) {
      const text = signed(actionEnvelope(host, startAction())).replace('"note":null', `"note":${huge}`);
      expect(text).toContain(huge);
      const answer = await host.post(text);
      expect(answer).toMatchObject({ status: 400, contentType: expect.stringContaining('text/plain') });
      expect(answer.body).toMatch(/^Failed to parse the request body as JSON: number out of range at line 1 column \d+$/);
    }
    expect(host.sim.runs().length).toBe(runsBefore);
    // The same action with its null intact executes: the refusal was the number's alone.
    const intact = await host.post(signed(actionEnvelope(host, startAction())));
    expect(resultOf(intact).status, intact.body).toBe('completed');
    expect(host.sim.runs().length).toBe(runsBefore + 1);
  });
});

describe('401: signature, signer and sender', () => {
  it('a body changed after signing → 401 route_mismatch (signature invalid)', async () => {
    const text = signed(actionEnvelope(host, statusAction())).replace('run_unknown', 'run_changed');
    const answer = await host.post(text);
    expectRefusal(answer, text, 401, { ...routeMismatch, message: 'connector-host request signature is invalid' });
  });

  it('signed by another key → 401 route_mismatch (signer is not the gateway)', async () => {
    const text = signed(actionEnvelope(host, statusAction()), strangerKey);
    const answer = await host.post(text);
    expect(answer.status).toBe(401);
    expect(errorOf(answer)).toMatchObject({ ...routeMismatch, message: 'connector-host request signer does not match the configured central gateway' });
  });

  it('the gateway key but a sender without trust_domain, or another principal id → 401', async () => {
    for (const signer of [
      { id: gatewayPrincipal.id, kind: 'service' },
      { ...gatewayPrincipal, id: 'service:other' },
    ]) {
      const text = signed(actionEnvelope(host, statusAction()), gatewayKey, signer);
      expectRefusal(await host.post(text), text, 401, routeMismatch);
    }
  });

  it('a bad signature AND a wrong route: the signature answers (401 before 403)', async () => {
    const action = statusAction();
    const text = signed(actionEnvelope(host, action, { ...routeFor(host, action.id, action.capability_id), tenant_id: 'tenant-other' }), strangerKey);
    expect((await host.post(text)).status).toBe(401);
  });
});

describe('403: recipient and pinned route', () => {
  const cases: Array<[string, (route: Record<string, unknown>) => Record<string, unknown>]> = [
    ['tenant_id', (route) => ({ ...route, tenant_id: 'tenant-other' })],
    ['instance_id', (route) => ({ ...route, instance_id: 'cinst_other' })],
    ['replica_id', (route) => ({ ...route, replica_id: 'crepl_other' })],
    ['version_id', (route) => ({ ...route, version_id: 'cver_other' })],
    ['manifest_digest', (route) => ({ ...route, manifest_digest: `sha256:${'c'.repeat(64)}` })],
    ['action_id', (route) => ({ ...route, action_id: actionId() })],
    ['capability_id', (route) => ({ ...route, capability_id: cap('run_stop') })],
  ];
  it.each(cases)('route %s differs → 403 route_mismatch', async (_field, change) => {
    const action = statusAction();
    const text = signed(actionEnvelope(host, action, change(routeFor(host, action.id, action.capability_id))));
    expectRefusal(await host.post(text), text, 403, routeMismatch);
  });

  it('to.id is not the host → 403; to.trust_domain of another domain → 403', async () => {
    for (const to of [
      { id: 'service:connector:other', kind: 'service' },
      { id: 'service:connector:hermes', kind: 'service', trust_domain: 'elsewhere.test' },
    ]) {
      const text = signed({ ...actionEnvelope(host, statusAction()), to });
      expectRefusal(await host.post(text), text, 403, { ...routeMismatch, message: 'connector-host request recipient does not match this host' });
    }
  });

  it('no security.connector_route → 403', async () => {
    const envelope = actionEnvelope(host, statusAction());
    const text = signed({ ...envelope, security: { trust_domain: 'connectors.test' } });
    expectRefusal(await host.post(text), text, 403, { ...routeMismatch, message: 'connector-host request is missing its pinned route' });
  });

  it('a sync action carrying a callback → 403; a streaming one on a host without a callback endpoint → 403', async () => {
    const action = { ...statusAction(), callback: { profile: 'aip.native.http.v1', target: 'http://127.0.0.1:9/aip/v1/connector-callbacks' } };
    const text = signed(actionEnvelope(host, action));
    expectRefusal(await host.post(text), text, 403, {
      ...routeMismatch,
      message: 'connector-host non-streaming action must not receive an external callback',
    });
    const streaming = { id: actionId(), capability_id: cap('run_events'), input: { run_id: 'run_x' }, mode: 'streaming' };
    const streamingText = signed(actionEnvelope(host, streaming));
    expectRefusal(await host.post(streamingText), streamingText, 403, { ...routeMismatch, message: 'connector-host stream callbacks are not configured' });
  });

  it('cancel of a session → 403; cancel of another action than the route’s → 403', async () => {
    const id = actionId();
    const route = routeFor(host, id, cap('run_status'));
    const session = signed(cancelEnvelope({ session: 'sess_1' }, route));
    expectRefusal(await host.post(session), session, 403, { ...routeMismatch, message: 'connector-host accepts only action-scoped cancellation' });
    const other = signed(cancelEnvelope({ action: actionId() }, route));
    expectRefusal(await host.post(other), other, 403, routeMismatch);
  });
});

describe('503 not ready, 429 capacity: actions only', () => {
  it('lease expired → 503 not_ready (temporary, retryable, retry_after = heartbeat); a cancel is not gated', async () => {
    const lease = host.status.lease;
    host.status.lease = { sequence: 1, expiresAtMs: Date.now() - 1 };
    try {
      const text = signed(actionEnvelope(host, statusAction()));
      expectRefusal(await host.post(text), text, 503, {
        code: 'connector_host.not_ready',
        category: 'temporary',
        retryable: true,
        retry_after_ms: HEARTBEAT_MS,
      });
      const id = actionId();
      const cancel = signed(cancelEnvelope({ action: id }, routeFor(host, id, cap('run_status'))));
      const answer = await host.post(cancel);
      expect(answer.status).toBe(200);
      expect(resultOf(answer)).toMatchObject({ action_id: id });
    } finally {
      host.status.lease = lease;
    }
  });

  it('a refused message is not recorded: the same signed envelope executes once the host is ready again', async () => {
    const text = signed(actionEnvelope(host, statusAction()));
    host.status.draining = true;
    expect((await host.post(text)).status).toBe(503);
    host.status.draining = false;
    expect((await host.post(text)).status).toBe(200);
    expect((await host.post(text)).status).toBe(409);
  });

  it('not ready AND an unauthorised credential revision: 503 answers (readiness before credentials)', async () => {
    const action = statusAction();
    const text = signed(actionEnvelope(host, action, { ...routeFor(host, action.id, action.capability_id), credential_revision_ref: 'cred-old' }));
    host.status.connectorReady = false;
    try {
      expect((await host.post(text)).status).toBe(503);
    } finally {
      host.status.connectorReady = true;
    }
  });

  it('max_in_flight actions running → 429 capacity (temporary, retryable, 100 ms); the slot frees when the action ends', async () => {
    // A run waiting for an approval: reading its events holds the only slot until a cancel stops it.
    const busy = await startHost({ maxInFlight: 1, script: () => [{ type: 'approval', command: 'rm -rf /tmp/x' }, { type: 'complete' }] });
    const started = await busy.post(
      signed(actionEnvelope(busy, { id: actionId(), capability_id: cap('run_start'), input: { body: { input: 'hi' } }, idempotency_key: 'k-busy' })),
    );
    const runId = String((resultOf(started).output as Record<string, unknown>).run_id);
    const events = { id: actionId(), capability_id: cap('run_events'), input: { run_id: runId } };
    const holding = busy.post(signed(actionEnvelope(busy, events)));
    await expect.poll(() => busy.status.inFlight).toBe(1);
    const text = signed(actionEnvelope(busy, statusAction()));
    expectRefusal(await busy.post(text), text, 429, { code: 'connector_host.capacity', category: 'temporary', retryable: true, retry_after_ms: 100 });
    const cancel = await busy.post(signed(cancelEnvelope({ action: events.id }, routeFor(busy, events.id, events.capability_id))));
    expect(cancel.status).toBe(200);
    expect((await holding).status).toBe(200);
    expect(busy.status.inFlight).toBe(0);
    expect((await busy.post(signed(actionEnvelope(busy, statusAction())))).status).toBe(200);
  });
});

describe('403/503: credential revision', () => {
  it('a pinned revision the host does not authorise → 403 credential_revision_denied; the authority down → 503 unavailable', async () => {
    const action = statusAction();
    const text = signed(actionEnvelope(host, action, { ...routeFor(host, action.id, action.capability_id), credential_revision_ref: 'cred-old' }));
    expectRefusal(await host.post(text), text, 403, { code: 'connector_host.credential_revision_denied', category: 'auth', retryable: false });
    host.credential.unavailable = true;
    try {
      const again = signed(actionEnvelope(host, statusAction()));
      expectRefusal(await host.post(again), again, 503, {
        code: 'connector_host.credential_revision_unavailable',
        category: 'temporary',
        retryable: true,
        retry_after_ms: 1000,
      });
    } finally {
      host.credential.unavailable = false;
    }
  });
});

describe('409: replay window and message id', () => {
  it('the same signed envelope twice: 200, then 409 connector_host.replay (policy, not retryable)', async () => {
    const text = signed(actionEnvelope(host, statusAction()));
    expect((await host.post(text)).status).toBe(200);
    const again = await host.post(text);
    expectRefusal(again, text, 409, { code: 'connector_host.replay', category: 'policy', retryable: false });
    expect(errorOf(again).message).toBe(`replayed message \`${sentEnvelope(text).message_id}\``);
  });

  it('sent_at 10 minutes old, or 31 s in the future → 409; 299 s old → executed', async () => {
    for (const offset of [-10 * 60_000, 31_000]) {
      const text = signed({ ...actionEnvelope(host, statusAction()), sent_at: rfc3339(Date.now() + offset) });
      const answer = await host.post(text);
      expectRefusal(answer, text, 409, { code: 'connector_host.replay' });
      expect(String(errorOf(answer).message)).toContain('outside accepted timestamp window');
    }
    const text = signed({ ...actionEnvelope(host, statusAction()), sent_at: rfc3339(Date.now() - REPLAY_WINDOW_MS + 1000) });
    expect((await host.post(text)).status).toBe(200);
  });

  it('replayed AND a credential refusal: the credential refusal answers (credentials before replay)', async () => {
    const action = statusAction();
    const text = signed(actionEnvelope(host, action));
    expect((await host.post(text)).status).toBe(200);
    host.credential.current = 'cred-new';
    try {
      expect((await host.post(text)).status).toBe(403);
    } finally {
      host.credential.current = null;
    }
    expect((await host.post(text)).status).toBe(409);
  });
});

describe('after the replay claim: identity binding and unsupported messages', () => {
  it('an action claiming another tenant → 403 auth.tenant_mismatch (the id is spent: the same message is then a replay)', async () => {
    const action = { ...statusAction(), identity: { tenant: { id: 'tenant-other' } } };
    const text = signed(actionEnvelope(host, action));
    expectRefusal(await host.post(text), text, 403, { code: 'auth.tenant_mismatch', category: 'auth', retryable: false });
    expect((await host.post(text)).status).toBe(409);
  });

  it('identity claims are lookup hints: the host tenant alone passes; a credential or human actor the binding lacks → 403', async () => {
    const own = { ...statusAction(), identity: { tenant: { id: host.pinned.tenantId } } };
    expect((await host.post(signed(actionEnvelope(host, own)))).status).toBe(200);
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ credential_ref: { id: 'cred', issuer: 'vault', scopes: [] } }, 'credential.required'],
      [{ human_actor: { id: 'human:someone', kind: 'human' } }, 'auth.identity_resolution_failed'],
      [{ external_account: { id: 'acct', system: 'hermes' } }, 'auth.identity_resolution_failed'],
    ];
    for (const [claim, code] of cases) {
      const action = { ...statusAction(), identity: { tenant: { id: host.pinned.tenantId }, ...claim } };
      const text = signed(actionEnvelope(host, action));
      expectRefusal(await host.post(text), text, 403, { code, category: 'auth', retryable: false });
    }
  });

  it('a body the host does not execute (a heartbeat) → 502 connector_host.execution (connector, not retryable)', async () => {
    const id = actionId();
    const envelope = {
      ...cancelEnvelope({ action: id }, routeFor(host, id, cap('run_status'))),
      message_type: 'aip.core.v1.heartbeat',
      body: { heartbeat: { sequence: 1 } },
    };
    const text = signed(envelope);
    expectRefusal(await host.post(text), text, 502, { code: 'connector_host.execution', category: 'connector', retryable: false });
  });
});

describe('answers and counters', () => {
  it('every answer after decoding copies session_id and correlation_id, answers the message id, and is fresh', async () => {
    const text = signed({ ...actionEnvelope(host, statusAction()), session_id: 'sess_abc' });
    const answer = await host.post(text);
    expect(answer.status).toBe(200);
    expect(peerResponseProblem(answer, sentEnvelope(text))).toBeUndefined();
    expect(answer.envelope.session_id).toBe('sess_abc');
  });

  it('a message text over 1,024 bytes is cut to 1,024 bytes at a character boundary', async () => {
    const action = { ...statusAction(), identity: { tenant: { id: `a${'é'.repeat(1000)}` } } };
    const answer = await host.post(signed(actionEnvelope(host, action)));
    const message = String(errorOf(answer).message);
    expect(Buffer.byteLength(message)).toBe(1023);
    // "tenant mismatch: requested `a" is 29 bytes: byte 1,024 is the middle of an é, which goes whole.
    expect(message.endsWith('é')).toBe(true);
    expect(message).not.toContain('\uFFFD');
  });

  it('requests_total counts every decoded request, rejected_total every refusal', async () => {
    const before = [host.status.counter('requests_total'), host.status.counter('rejected_total')];
    await host.post(signed(actionEnvelope(host, statusAction()), strangerKey));
    await host.post(signed(actionEnvelope(host, statusAction())));
    expect([host.status.counter('requests_total') - (before[0] ?? 0), host.status.counter('rejected_total') - (before[1] ?? 0)]).toEqual([2, 1]);
  });
});
