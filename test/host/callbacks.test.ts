/**
 * Streaming actions: each chunk a signed `stream_chunk` POSTed to the runtime's callback ingress,
 * in order and awaited (a slow ingress holds the reading), retried when the ingress is
 * unavailable for a moment, and a chunk that cannot be delivered never losing the final result.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunStep } from 'aip-connector-hermes-agent/simulator';
import { outboundAgent } from '../../src/host/outbound.js';
import type { Envelope } from '../../src/host/wire/envelope.js';
import { verifyEnvelopeText } from '../../src/host/wire/envelope.js';
import { parseWire } from '../../src/host/wire/json.js';
import { createPrivateCa, type PrivateCa } from '../helpers/private-ca.js';
import {
  actionEnvelope,
  actionId,
  cap,
  errorOf,
  gatewayKey,
  gatewayPrincipal,
  hostKey,
  hostPrincipal,
  type HostUnderTest,
  type Ingress,
  resultOf,
  roundTrips,
  routeFor,
  signed,
  startHost,
  startIngress,
} from './messages-support.js';

const talks = (): RunStep[] => [
  { type: 'delta', text: 'one ' },
  { type: 'delta', text: 'two ' },
  { type: 'delta', text: 'three' },
  { type: 'complete', output: 'one two three' },
];

let ingress: Ingress;
let host: HostUnderTest;
beforeAll(async () => {
  ingress = await startIngress();
  host = await startHost({ script: talks, callbackTarget: ingress.target });
});

const recipient = () => ({ ...gatewayPrincipal, did: gatewayKey.did });

async function finishedRun(): Promise<string> {
  const id = actionId();
  const answer = await host.post(
    signed(actionEnvelope(host, { id, capability_id: cap('run_start'), input: { body: { input: 'count' } }, idempotency_key: `k-${id}` })),
  );
  const runId = String((resultOf(answer).output as Record<string, unknown>).run_id);
  await expect.poll(() => host.sim.run(runId)?.status).toBe('completed');
  return runId;
}

/** A streaming run_events action exactly as the reference dispatcher rewrites it. */
function streamingRequest(
  runId: string,
  change: { target?: string; recipient?: object; route?: (route: Record<string, unknown>) => Record<string, unknown> } = {},
  on: HostUnderTest = host,
) {
  const id = actionId();
  const route = routeFor(on, id, cap('run_events'), 'streaming');
  const metadataRoute = change.route ? change.route(route) : route;
  const action = {
    id,
    capability_id: cap('run_events'),
    input: { run_id: runId },
    mode: 'streaming',
    callback: {
      profile: 'aip.native.http.v1',
      target: change.target ?? ingress.target,
      metadata: { connector_callback: metadataRoute, connector_callback_recipient: change.recipient ?? recipient() },
    },
  };
  return { id, route, text: signed(actionEnvelope(on, action, route)) };
}

const chunksOf = (received: Ingress['received'], id: string) =>
  received.filter((item) => (item.envelope.body as { stream_chunk: { action_id: string } }).stream_chunk.action_id === id);

describe('delivered chunks', () => {
  it('every chunk reaches the ingress in order, signed, to the recipient, with the route as connector_callback; the result comes on the POST', async () => {
    const runId = await finishedRun();
    const request = streamingRequest(runId);
    const answer = await host.post(request.text);
    expect(answer.status).toBe(200);
    expect(resultOf(answer)).toMatchObject({ action_id: request.id, status: 'completed', output: { text: 'one two three', terminal: true } });
    const chunks = chunksOf(ingress.received, request.id);
    const sequences = chunks.map((item) => (item.envelope.body as { stream_chunk: { sequence: number } }).stream_chunk.sequence);
    expect(sequences).toEqual(sequences.map((_, index) => index));
    expect(chunks.length).toBeGreaterThanOrEqual(4);
    expect((chunks.at(-1)?.envelope.body as { stream_chunk: { kind: string } }).stream_chunk.kind).toBe('done');
    for (const { text, envelope } of chunks) {
      const parsed = parseWire(text);
      expect('error' in parsed ? false : verifyEnvelopeText(parsed, hostKey.did)).toBe(true);
      expect(envelope.message_type).toBe('aip.core.v1.stream_chunk');
      expect(roundTrips(text)).toBe(true);
      expect(envelope.to).toEqual(recipient());
      expect(envelope.from).toEqual({ ...hostPrincipal, did: hostKey.did });
      expect(envelope.security).toEqual({ connector_callback: request.route, did: hostKey.did, signature: expect.any(String) });
      expect(Object.keys((envelope.security as { connector_callback: object }).connector_callback)).toHaveLength(14);
      expect(Math.abs(Date.parse(envelope.sent_at) - Date.now())).toBeLessThan(5 * 60_000);
    }
  });

  it('an ingress unavailable for two attempts (503, then 429): the chunk is sent again and every chunk arrives once', async () => {
    const runId = await finishedRun();
    const request = streamingRequest(runId);
    ingress.answers.push(503, 429);
    const answer = await host.post(request.text);
    expect(answer.status).toBe(200);
    const sequences = chunksOf(ingress.received, request.id).map(
      (item) => (item.envelope.body as { stream_chunk: { sequence: number } }).stream_chunk.sequence,
    );
    expect(sequences).toEqual(sequences.map((_, index) => index));
    expect(JSON.stringify(resultOf(answer).message ?? [])).not.toContain('not delivered');
  });

  it('a 408 and a 425 are temporary too (post_secure_callback: a client error but 408/425/429 is permanent): sent again, every chunk arrives', async () => {
    const runId = await finishedRun();
    const request = streamingRequest(runId);
    const attemptsBefore = ingress.attempts;
    ingress.answers.push(408, 425);
    const answer = await host.post(request.text);
    expect(answer.status).toBe(200);
    expect(JSON.stringify(resultOf(answer).message ?? [])).not.toContain('not delivered');
    const delivered = chunksOf(ingress.received, request.id);
    expect(delivered.length).toBeGreaterThan(0);
    expect(ingress.attempts - attemptsBefore).toBe(delivered.length + 2);
  });

  it('a slow ingress holds the reading: while the first chunk is unanswered no second chunk is sent and the action is in flight', async () => {
    const runId = await finishedRun();
    const request = streamingRequest(runId);
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const attemptsBefore = ingress.attempts;
    ingress.gate = () => held;
    const answering = host.post(request.text);
    await expect.poll(() => ingress.attempts).toBe(attemptsBefore + 1);
    // Let the host read on if it would: nothing else may reach the ingress, and the action is not answered.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(ingress.attempts).toBe(attemptsBefore + 1);
    expect(host.status.inFlight).toBe(1);
    ingress.gate = undefined;
    release();
    expect((await answering).status).toBe(200);
  });
});

describe('undeliverable chunks never lose the result', () => {
  it('an ingress that always fails: the action still answers 200 with its result, saying which chunks were not delivered', async () => {
    const runId = await finishedRun();
    const request = streamingRequest(runId);
    const attemptsBefore = ingress.attempts;
    ingress.answers.push(500, 500, 500);
    const answer = await host.post(request.text);
    expect(answer.status).toBe(200);
    const result = resultOf(answer);
    expect(result).toMatchObject({ status: 'completed', output: { text: 'one two three' } });
    expect((result.message as Array<{ text: string }>).at(-1)?.text).toMatch(
      /chunk\(s\) from sequence 0 on were not delivered to the callback target \(status 500\)/,
    );
    // Three attempts at the first chunk, then delivery stops: no later chunk leaves a gap behind it.
    expect(ingress.attempts - attemptsBefore).toBe(3);
    expect(chunksOf(ingress.received, request.id)).toEqual([]);
  });

  it('a refusal (403) is not retried: one attempt, then delivery stops', async () => {
    const runId = await finishedRun();
    const request = streamingRequest(runId);
    const attemptsBefore = ingress.attempts;
    ingress.answers.push(403);
    const answer = await host.post(request.text);
    expect(answer.status).toBe(200);
    expect(ingress.attempts - attemptsBefore).toBe(1);
  });

  it('an ingress that is down (connection refused): the result still comes back', async () => {
    const down = await startHost({ sim: host.sim, callbackTarget: 'http://127.0.0.1:1/aip/v1/connector-callbacks' });
    const runId = await finishedRun();
    const unreachable = 'http://127.0.0.1:1/aip/v1/connector-callbacks';
    const answer = await down.post(streamingRequest(runId, { target: unreachable }, down).text);
    expect(answer.status).toBe(200);
    expect(resultOf(answer)).toMatchObject({ status: 'completed' });
    expect(String((resultOf(answer).message as Array<{ text: string }>).at(-1)?.text)).toContain('not delivered');
  });
});

describe('an https callback target under a private CA (AIP_CONNECTOR_HOST_TLS_CA_FILE)', () => {
  let ca: PrivateCa;
  beforeAll(() => {
    ca = createPrivateCa();
  });
  afterAll(() => ca.remove());

  /** A streaming action on a host whose outbound client trusts the private root (or not), to an ingress presenting a leaf for `subjectAltName`. */
  async function streamOverTls(subjectAltName: string, trustPrivateRoot: boolean) {
    const tlsIngress = await startIngress(ca.leaf(subjectAltName));
    const outbound = outboundAgent(trustPrivateRoot ? ca.caPem : undefined);
    try {
      const tlsHost = await startHost({ sim: host.sim, callbackTarget: tlsIngress.target, outbound });
      const request = streamingRequest(await finishedRun(), { target: tlsIngress.target }, tlsHost);
      const answer = await tlsHost.post(request.text);
      expect(answer.status).toBe(200);
      const result = resultOf(answer);
      const notes = ((result.message ?? []) as Array<{ text: string }>).map((part) => part.text);
      return { result, notes, delivered: chunksOf(tlsIngress.received, request.id), attempts: tlsIngress.attempts };
    } finally {
      await outbound.close();
    }
  }

  it('with the CA file’s root trusted: every chunk is delivered over https', async () => {
    const { result, notes, delivered } = await streamOverTls('IP:127.0.0.1', true);
    expect(result).toMatchObject({ status: 'completed', output: { text: 'one two three' } });
    expect(notes.filter((note) => note.includes('not delivered'))).toEqual([]);
    expect(delivered.length).toBeGreaterThanOrEqual(4);
    expect((delivered.at(-1)?.envelope.body as { stream_chunk: { kind: string } }).stream_chunk.kind).toBe('done');
  });

  it.each([
    ['without the private root: the leaf cannot be verified', 'IP:127.0.0.1', false, 'UNABLE_TO_VERIFY_LEAF_SIGNATURE'],
    ['with it, a certificate for another name', 'DNS:central.other.test', true, 'ERR_TLS_CERT_ALTNAME_INVALID'],
  ])('%s: nothing is delivered, and the result names the TLS verdict', async (_name, subjectAltName, trust, code) => {
    const { result, notes, delivered, attempts } = await streamOverTls(subjectAltName, trust);
    expect(result).toMatchObject({ status: 'completed', output: { text: 'one two three' } });
    expect(notes.at(-1)).toMatch(new RegExp(`from sequence 0 on were not delivered to the callback target \\(${code}\\)`));
    expect(delivered).toEqual([]);
    expect(attempts).toBe(0);
  });
});

describe('a callback that does not match is refused before anything runs (403)', () => {
  it.each([
    ['another target', { target: 'http://127.0.0.1:9/aip/v1/connector-callbacks' }],
    ['another recipient', { recipient: { id: 'service:other', kind: 'service' } }],
    ['a connector_callback that is not the route', { route: (route: Record<string, unknown>) => ({ ...route, fence_token: 'route_other' }) }],
  ])('%s', async (_name, change) => {
    const request = streamingRequest('run_x', change);
    const answer = await host.post(request.text);
    expect(answer.status).toBe(403);
    expect(errorOf(answer)).toMatchObject({
      code: 'connector_host.route_mismatch',
      message: 'connector-host streaming callback does not match its pinned route and configured central ingress',
    });
  });

  it('a route whose original_mode is not streaming', async () => {
    const request = streamingRequest('run_x');
    const envelope = JSON.parse(request.text) as Envelope;
    const route = { ...request.route, original_mode: null };
    const action = (envelope.body as { action: { callback: { metadata: Record<string, unknown> } } }).action;
    action.callback.metadata.connector_callback = route;
    const answer = await host.post(signed({ ...envelope, security: { connector_route: route } }));
    expect(answer.status).toBe(403);
  });
});

describe('a chunk with no form the reference types accept', () => {
  it('(a lone surrogate from the provider) is delivered and answered with U+FFFD in its place, as a UTF-8 reader would see it', async () => {
    const broken = await startHost({
      script: () => [{ type: 'delta', text: 'ok \ud800' }, { type: 'complete' }],
      callbackTarget: ingress.target,
    });
    const id = actionId();
    const started = await broken.post(
      signed(actionEnvelope(broken, { id, capability_id: cap('run_start'), input: { body: { input: 'x' } }, idempotency_key: `k-${id}` })),
    );
    const runId = String((resultOf(started).output as Record<string, unknown>).run_id);
    await expect.poll(() => broken.sim.run(runId)?.status).toBe('completed');
    const request = streamingRequest(runId, {}, broken);
    const answer = await broken.post(request.text);
    expect(answer.status).toBe(200);
    expect(resultOf(answer)).toMatchObject({ status: 'completed', output: { text: 'ok \ufffd' } });
    expect(roundTrips(answer.body)).toBe(true);
    const chunks = chunksOf(ingress.received, request.id);
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.every(({ text }) => roundTrips(text))).toBe(true);
    expect(chunks[0]?.text).toContain('\ufffd');
  });
});
