/**
 * The authentication lane: large bodies authenticated in a worker thread (the built worker, dist/host/),
 * with the same answers as on the event loop, the smallest waiting body first, a body whose client left
 * never authenticated, and a body that exhausts the worker's heap failing alone.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { authenticate, type EarlyAnswer } from '../../src/host/authenticate.js';
import type { PinnedIdentity } from '../../src/host/checks.js';
import { type AuthenticationLane, createAuthenticationLane, type LaneOutcome } from '../../src/host/lane.js';
import { type Envelope, signEnvelope, verifyEnvelopeText } from '../../src/host/wire/envelope.js';
import { correlationId, messageId } from '../../src/host/wire/ids.js';
import { parseWire } from '../../src/host/wire/json.js';
import { signingKeyFromSeed } from '../../src/host/wire/keys.js';
import { rfc3339 } from '../../src/host/wire/time.js';

const WORKER = new URL('../../dist/host/authenticate-worker.js', import.meta.url);
const MiB = 1024 * 1024;
const hostKey = signingKeyFromSeed(new Uint8Array(32).fill(0x1d));
const gatewayKey = signingKeyFromSeed(new Uint8Array(32).fill(0x2e));
const gateway = { id: 'service:getaip:server', kind: 'service', trust_domain: 'connectors.test' };
const pinned: PinnedIdentity = {
  host: { id: 'service:connector:hermes', kind: 'service', trust_domain: 'connectors.test', did: hostKey.did },
  gateway,
  gatewayDid: gatewayKey.did,
  tenantId: 'tenant-acme',
  instanceId: 'cinst_hermes_acme',
  replicaId: 'crepl_hermes_acme_1',
  versionId: 'cver_hermes_1',
  manifestDigest: `sha256:${'b'.repeat(64)}`,
};
const context = { key: hostKey, pinned, now: Date.now };

const lanes: AuthenticationLane[] = [];
afterEach(async () => {
  await Promise.all(lanes.splice(0).map((lane) => lane.close()));
});

function lane(heapMb = 256): AuthenticationLane {
  const created = createAuthenticationLane({ key: hostKey, pinned, heapMb, workerUrl: WORKER });
  lanes.push(created);
  return created;
}

/** A signed action; with `filler` (JSON text) put in its input after signing, so that its signature no longer covers it. */
function body(filler?: string): Buffer {
  const envelope: Envelope = {
    aip_version: '1.0',
    message_type: 'aip.core.v1.action',
    message_id: messageId(),
    sent_at: rfc3339(Date.now()),
    body: { action: { id: 'act_0123456789abcdef0123456789abcdef', capability_id: 'cap:hermes_agent:local:run_status', input: { pad: '@@' } } },
    correlation_id: correlationId(),
    to: { id: pinned.host.id, kind: pinned.host.kind },
    security: { trust_domain: 'connectors.test' },
  };
  const text = signEnvelope(envelope, gatewayKey, gateway).text;
  return Buffer.from(filler === undefined ? text : text.replace('"@@"', filler));
}

/** About `bytes` bytes of tiny values: the costliest JSON per byte. */
const numbers = (bytes: number) => `[${'0,'.repeat(Math.floor(bytes / 2))}0]`;

const early = (outcome: LaneOutcome): EarlyAnswer => {
  if (typeof outcome === 'string') throw new Error(`expected an answer, got ${outcome}`);
  return outcome;
};

describe('the authentication lane', () => {
  it('answers as the event loop does: the same status, code and counters, the 401 signed by the host', async () => {
    const authenticationLane = lane();
    const cases = [body(numbers(MiB)), Buffer.from('{"not json'), Buffer.from('{"hello":"world"}')];
    for (const bytes of cases) {
      const inLine = authenticate(bytes, context);
      if (!('early' in inLine)) throw new Error('expected a refusal');
      const answered = early(await authenticationLane.authenticate(bytes));
      expect(answered.answer.status).toBe(inLine.early.answer.status);
      expect(answered.answer.contentType).toBe(inLine.early.answer.contentType);
      expect(answered.counts).toEqual(inLine.early.counts);
      if (answered.answer.status === 401) {
        const parsed = parseWire(answered.answer.body);
        if ('error' in parsed) throw new Error(parsed.error);
        expect(verifyEnvelopeText(parsed, hostKey.did)).toBe(true);
        expect((parsed.value as { body: { error: { error: { code: string } } } }).body.error.error.code).toBe('connector_host.route_mismatch');
      } else expect(answered.answer.body).toBe(inLine.early.answer.body);
    }
    expect(await authenticationLane.authenticate(body())).toBe('authenticated');
  });

  it('takes the smallest waiting body first, and never authenticates one whose client left', async () => {
    const authenticationLane = lane();
    const order: string[] = [];
    const submit = (name: string, bytes: Buffer, signal?: AbortSignal) =>
      authenticationLane.authenticate(bytes, signal).then((outcome) => {
        order.push(`${name}:${typeof outcome === 'string' ? outcome : outcome.answer.status}`);
      });
    const gone = new AbortController();
    const done = Promise.all([
      // The first occupies the worker while the others wait.
      submit('first', body(numbers(2 * MiB))),
      submit('large', body(numbers(2 * MiB))),
      submit('left', body(numbers(MiB)), gone.signal),
      submit('small', body(numbers(100 * 1024))),
    ]);
    gone.abort();
    await done;
    expect(order).toEqual(['left:abandoned', 'first:401', 'small:401', 'large:401']);
  });

  it('fails only the body that exhausts the worker heap; the next body gets a fresh worker', async () => {
    const authenticationLane = lane(16);
    await expect(authenticationLane.authenticate(body(numbers(4 * MiB - 4096)))).rejects.toThrow(/authentication worker stopped/);
    expect(early(await authenticationLane.authenticate(Buffer.from('{"hello":"world"}'))).answer.status).toBe(400);
  });
});
