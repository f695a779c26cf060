/**
 * The runtime double itself, against the reference's signed vectors: its control plane grants
 * the vector requests with the sequence rules and refuses what the reference refuses, its
 * dispatcher accepts the vector response and names each check a changed response fails, its
 * callback ingress accepts a valid chunk and refuses what the central side refuses. A double
 * that accepted everything would make every §3 case pass; these prove its checks can fail.
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { signEnvelope, type Envelope } from '../../../src/host/wire/envelope.js';
import { canonicalJson, wireJson } from '../../../src/host/wire/json.js';
import { signingKeyFromSeed } from '../../../src/host/wire/keys.js';
import { verifyControlResponse } from '../../../src/host/wire/control.js';
import { parseRfc3339, rfc3339 } from '../../../src/host/wire/time.js';
import { startCallbackIngress, type CallbackIngress } from '../../helpers/aip-runtime/callback-ingress.js';
import { startControlPlane, type ControlPlane } from '../../helpers/aip-runtime/control-plane.js';
import { ROUTE_KEYS, gatewayParty, hexId, type ConnectorRoute } from '../../helpers/aip-runtime/deployment.js';
import { readLimitedBody, sendJson, startLoopbackServer } from '../../helpers/aip-runtime/http.js';
import { createDispatcher, pinnedRoute, type HostTarget, type Prepared } from '../../helpers/aip-runtime/dispatcher.js';

interface Vector {
  name: string;
  signer_seed_hex: string;
  signer_did: string;
  document: Record<string, any>;
}

const vectors: Vector[] = readFileSync(new URL('../../../fixtures/aip-vectors/samples.jsonl', import.meta.url), 'utf8')
  .split('\n')
  .filter((line) => line.trim() !== '')
  .map((line) => JSON.parse(line) as Vector);
const vector = (name: string) => vectors.find((entry) => entry.name === name)!;
const VECTOR_NOW = parseRfc3339('2026-12-01T21:00:05Z')!;
const hostKey = signingKeyFromSeed(Buffer.from(vector('native.response.action_result').signer_seed_hex, 'hex'));

/** A replica of the test deployment's coordinates, signing with the vectors' host key. */
function hermesTarget(url: string): HostTarget {
  return {
    url,
    identity: { did: hostKey.did, principal: { id: 'agent:hermes_agent:connector', kind: 'agent' }, replicaId: 'crepl_hermes_acme_1' },
    tenantId: 'tenant-acme',
    instanceId: 'cinst_hermes_acme',
    versionId: 'cver_hermes_1',
    manifestDigest: `sha256:${'b'.repeat(64)}`,
  };
}

const open: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((part) => part.close()));
});

async function controlPlane(): Promise<ControlPlane> {
  const control = await startControlPlane({ hostDids: () => [vector('control.request.register').signer_did], leaseTtlMs: 30_000, now: () => VECTOR_NOW });
  open.push(control);
  return control;
}

const post = (control: ControlPlane, body: string, contentType = 'application/json') =>
  fetch(control.url, { method: 'POST', headers: { 'content-type': contentType }, body });

describe('the control plane double', () => {
  it('grants the vector register, heartbeat, drain and offline in sequence, each response signed by its DID', async () => {
    const control = await controlPlane();
    const outcomes = [];
    for (const name of ['register', 'heartbeat', 'drain', 'offline']) {
      const response = await post(control, JSON.stringify(vector(`control.request.${name}`).document));
      expect(response.status).toBe(200);
      const verified = verifyControlResponse(await response.text(), control.did);
      expect(verified.ok, JSON.stringify(verified)).toBe(true);
      outcomes.push(verified.ok ? verified.response.outcome : undefined);
    }
    expect(outcomes.map((outcome: any) => outcome.lease?.sequence ?? outcome.status)).toEqual([1, 2, 3, 'offline']);
    expect(control.records.map((record) => record.problems)).toEqual([[], [], [], []]);
  });

  it('answers a re-sent request with the same response, and refuses a reused request_id, a lost fence, a second live registration', async () => {
    const control = await controlPlane();
    const register = JSON.stringify(vector('control.request.register').document);
    const first = await (await post(control, register)).text();
    expect(await (await post(control, register)).text()).toBe(first);
    const heartbeat = vector('control.request.heartbeat').document;
    const reused = { ...heartbeat, request: { ...heartbeat['request'], request_id: vector('control.request.register').document['request']['request_id'] } };
    const refusals = [
      await post(control, JSON.stringify(reused)),
      await post(control, JSON.stringify(vector('control.request.drain').document)),
      await post(control, JSON.stringify(vector('control.request.offline').document)),
    ];
    expect(refusals.map((response) => response.status)).toEqual([403, 403, 403]);
    const messages = await Promise.all(refusals.map(async (response) => (JSON.parse(await response.text()) as any).response.outcome.message as string));
    expect(messages[1]).toContain('lost its lease-sequence fence');
  });

  it('consumes every verified request id (process_connector_host_control): one refused or failed once is refused again; only the last committed one is answered again', async () => {
    const control = await controlPlane();
    const register = vector('control.request.register');
    const signer = signingKeyFromSeed(Buffer.from(register.signer_seed_hex, 'hex'));
    const withFreshId = (document: Record<string, any>) => {
      const request = { ...document['request'], request_id: hexId('msg_') };
      return JSON.stringify({ request, signature: signer.sign(canonicalJson(request)) });
    };
    control.mode = 'unavailable';
    const failed = withFreshId(register.document);
    expect((await post(control, failed)).status).toBe(503);
    control.mode = 'grant';
    const again = await post(control, failed);
    expect(again.status).toBe(403);
    expect(((await again.json()) as any).response.outcome.message).toContain('already consumed');
    const granted = withFreshId(register.document);
    expect((await post(control, granted)).status).toBe(200);
    expect((await post(control, granted)).status).toBe(200);
    expect((await post(control, JSON.stringify(vector('control.request.heartbeat').document))).status).toBe(200);
    expect((await post(control, granted)).status).toBe(403);
  });

  it('refuses a bad signature, an unknown signer and a stale request (403) and what does not decode (415, 413, 400, 422)', async () => {
    const control = await controlPlane();
    const register = vector('control.request.register').document;
    const badSignature = { ...register, signature: hostKey.sign('something else') };
    expect((await post(control, JSON.stringify(badSignature))).status).toBe(403);
    expect(control.records.at(-1)!.problems).toEqual(['signature does not verify over the canonical request']);
    expect((await post(control, JSON.stringify(register), 'text/plain')).status).toBe(415);
    expect((await post(control, `{"pad":"${'x'.repeat(70 * 1024)}"}`)).status).toBe(413);
    expect((await post(control, '{"request":')).status).toBe(400);
    const stringLease = structuredClone(register);
    stringLease['request']['command']['payload']['replica']['lease_expires_at'] = '2026-12-01T21:00:30Z';
    expect((await post(control, JSON.stringify(stringLease))).status).toBe(422);
    const late = await startControlPlane({ hostDids: () => [register['request']['signer_did']], leaseTtlMs: 30_000, now: () => VECTOR_NOW + 60_000 });
    open.push(late);
    expect((await post(late, JSON.stringify(register))).status).toBe(403);
    expect(late.records[0]!.problems).toEqual(['request expired']);
  });
});

describe('the dispatcher double', () => {
  const request = vector('native.request.approved_action').document as unknown as Envelope;
  const response = vector('native.response.action_result').document as unknown as Envelope;
  const gateway = { ...gatewayParty(), principal: request.from! };
  const target: HostTarget = {
    url: 'http://127.0.0.1:9/aip/v1/messages',
    identity: { did: hostKey.did, principal: { id: request.to!.id, kind: request.to!.kind }, replicaId: 'crepl_probe' },
    tenantId: 'tenant-acme',
    instanceId: 'cinst_probe',
    versionId: 'cver_probe',
    manifestDigest: `sha256:${'b'.repeat(64)}`,
  };
  const prepared: Prepared = { target, envelope: request, text: JSON.stringify(request), headers: {}, route: (request.security as any).connector_route };

  async function verdictFor(text: string) {
    const ingress = await startCallbackIngress(gateway);
    open.push(ingress);
    return createDispatcher(gateway, ingress, () => VECTOR_NOW).verify(prepared, { status: 200, text, attempts: 1 });
  }

  it('accepts the vector action_result answering the vector request', async () => {
    const verdict = await verdictFor(JSON.stringify(response));
    expect(verdict.failed).toEqual([]);
    expect(verdict.actionResult?.status).toBe('completed');
  });

  it('names the check a changed response fails', async () => {
    const tampered = structuredClone(response) as any;
    tampered.body.action_result.status = 'failed';
    expect((await verdictFor(JSON.stringify(tampered))).failed.map((failure) => failure.split(':')[0])).toEqual(['verify_peer_response.signature']);

    // signEnvelope would drop the empty list; a careless signer signs it as it is, and the reference verifier's re-serialisation drops it.
    const withEmptyList = structuredClone(response) as any;
    withEmptyList.body.action_result.message = [];
    delete withEmptyList.security.signature;
    withEmptyList.security.signature = hostKey.sign(canonicalJson(withEmptyList));
    expect((await verdictFor(wireJson(withEmptyList))).failed.map((failure) => failure.split(':')[0])).toEqual([
      'verify_peer_response.signature',
      'action.sync.response_roundtrips_reference_serde',
    ]);

    const { envelope: otherCorrelation } = signEnvelope({ ...response, correlation_id: 'corr_00000000000000000000000000000000' }, hostKey, response.from!);
    expect((await verdictFor(wireJson(otherCorrelation))).failed.map((failure) => failure.split(':')[0])).toEqual(['verify_peer_response.correlation_id']);
  });
});

describe('the dispatcher transport', () => {
  it('re-sends the same signed envelope after a transport error, with the reference headers', async () => {
    const received: Array<{ body: string; headers: Record<string, unknown> }> = [];
    const server = await startLoopbackServer(async (request, response) => {
      const body = await readLimitedBody(request, 1024 * 1024);
      received.push({ body: body.ok ? body.text : '', headers: request.headers });
      if (received.length === 1) request.socket.destroy();
      else sendJson(response, 200, '{}');
    });
    open.push(server);
    const gateway = gatewayParty();
    const ingress = await startCallbackIngress(gateway);
    open.push(ingress);
    const dispatcher = createDispatcher(gateway, ingress);
    const target = hermesTarget(`${server.url}/aip/v1/messages`);
    const prepared = dispatcher.prepareAction(target, {
      id: hexId('act_'),
      capability_id: 'cap:hermes_agent:local:run_status',
      input: { run_id: 'run_1' },
      mode: 'async',
    });
    const exchange = await dispatcher.send(prepared);
    expect(exchange.attempts).toBe(2);
    expect(received.map((entry) => entry.body)).toEqual([prepared.text, prepared.text]);
    expect(received[1]!.headers).toMatchObject({
      'content-type': 'application/json',
      'aip-trust-domain': 'connectors.test',
      'idempotency-key': prepared.route!.action_id,
    });
    const action = (prepared.envelope.body as any).action;
    expect([action.mode, action.identity, action.callback]).toEqual(['sync', { tenant: { id: 'tenant-acme' } }, undefined]);
    expect(Object.keys(prepared.route!)).toEqual([...ROUTE_KEYS]);
  });
});

describe('the callback ingress double', () => {
  const gateway = gatewayParty();
  const hostPrincipal = { id: 'agent:hermes_agent:connector', kind: 'agent', trust_domain: 'connectors.test' };
  let ingress: CallbackIngress;

  async function withRoute(): Promise<ConnectorRoute> {
    ingress = await startCallbackIngress(gateway);
    open.push(ingress);
    ingress.trustHost({ did: hostKey.did, principal: { ...hostPrincipal, did: hostKey.did }, replicaId: 'crepl_hermes_acme_1' });
    const route = pinnedRoute(hermesTarget('http://127.0.0.1:9/aip/v1/messages'), {
      id: hexId('act_'),
      capability_id: 'cap:hermes_agent:local:run_events',
      mode: 'streaming',
    });
    ingress.assign(route);
    ingress.executing(route.action_id, true);
    return route;
  }

  function chunkText(route: object, chunk: Record<string, unknown>, sentAt = Date.now()): string {
    const envelope: Envelope = {
      aip_version: '1.0',
      message_type: 'aip.core.v1.stream_chunk',
      message_id: hexId('msg_'),
      sent_at: rfc3339(sentAt),
      body: { stream_chunk: chunk },
      to: gateway.principal,
      security: { connector_callback: route },
    };
    return signEnvelope(envelope, hostKey, hostPrincipal).text;
  }

  const deliver = (text: string) => fetch(ingress.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text });

  it('accepts a valid chunk with a signed event_stream, and refuses an extra route key, another action id, a stale sent_at', async () => {
    const route = await withRoute();
    const chunk = { action_id: route.action_id, sequence: 0, kind: 'data', data: { n: 1.5 }, part: { type: 'text', text: 'hi' } };
    const accepted = await deliver(chunkText({ ...route }, chunk));
    expect(accepted.status).toBe(200);
    expect(Object.keys(((await accepted.json()) as any).body)).toEqual(['event_stream']);
    const refused = [
      await deliver(chunkText({ ...route, approval_authorization: {} }, { ...chunk, sequence: 1 })),
      await deliver(chunkText(route, { ...chunk, action_id: hexId('act_'), sequence: 2 })),
      await deliver(chunkText(route, { ...chunk, sequence: 3 }, Date.now() - 10 * 60_000)),
    ];
    expect(refused.map((response) => response.status)).toEqual([400, 400, 400]);
    expect(ingress.accepted(route.action_id)).toEqual([chunk]);
    expect(ingress.records.slice(1).map((record) => record.problems.length > 0)).toEqual([true, true, true]);
    expect(canonicalJson(ingress.records[0]!.chunk)).toBe(canonicalJson(chunk));
  });

  it('reads numbers as serde_json does: refuses a chunk signed over the timestamp as sent when serde_json reads it one double away', async () => {
    const route = await withRoute();
    // serde_json's default parse reads 1796300632.7149935 as 1796300632.7149937 (fixtures/aip-vectors/serde-json-floats.jsonl).
    const chunk = { action_id: route.action_id, sequence: 0, kind: 'data', data: { event: 'message.delta', timestamp: 1796300632.7149935 } };
    const text = chunkText(route, chunk);
    expect(text).toContain('"timestamp":1796300632.7149935');
    const sent = JSON.parse(text) as Envelope & { security: Record<string, unknown> };
    const { signature: _signature, ...unsignedSecurity } = sent.security;
    // A signer that signs the text it sends (as the host did before it emulated serde_json's parse).
    const signedAsSent = canonicalJson({ ...sent, security: unsignedSecurity }).replace('1796300632.7149937', '1796300632.7149935');
    expect(signedAsSent).toContain('"timestamp":1796300632.7149935');
    const naive = wireJson({ ...sent, security: { ...unsignedSecurity, signature: hostKey.sign(signedAsSent) } });
    const refused = await deliver(naive);
    expect(refused.status).toBe(401);
    expect(ingress.records[0]!.problems).toContain('the signature does not verify over the canonical envelope');
    const accepted = await deliver(text);
    expect(accepted.status).toBe(200);
    expect(ingress.accepted(route.action_id)).toEqual([{ ...chunk, data: { ...chunk.data, timestamp: 1796300632.7149937 } }]);
  });

  it('refuses a chunk once no central execution waits for the action (ingest_assigned_connector_stream_chunk), 401', async () => {
    const route = await withRoute();
    const chunk = { action_id: route.action_id, sequence: 0, kind: 'data', data: { n: 1 } };
    ingress.executing(route.action_id, false);
    const refused = await deliver(chunkText(route, chunk));
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as any).body.error.error).toMatchObject({ code: 'auth.not_authorized', category: 'auth', retryable: false });
    expect(ingress.accepted(route.action_id)).toEqual([]);
  });
});
