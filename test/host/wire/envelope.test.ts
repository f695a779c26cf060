import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Envelope, inFieldOrder, type Principal, signEnvelope, verifyEnvelopeText } from '../../../src/host/wire/envelope.js';
import { parseWire, wireJson } from '../../../src/host/wire/json.js';
import { signingKeyFromSeed } from '../../../src/host/wire/keys.js';
import { reserialize } from '../../../src/host/wire/reference-types.js';

const SEED = 20261202;
const hostKey = signingKeyFromSeed(new Uint8Array(32).fill(0x1d));
const otherKey = signingKeyFromSeed(new Uint8Array(32).fill(0x0b));
const host: Principal = { id: 'service:connector:hermes', kind: 'service', trust_domain: 'connectors.test' };

function envelopeWith(output: unknown): Envelope {
  return {
    aip_version: '1.0',
    message_type: 'aip.core.v1.action_result',
    message_id: 'msg_0190a000000070008000000000000013',
    sent_at: '2026-12-01T21:00:00.5Z',
    body: { action_result: { action_id: 'act_1', status: 'completed', output } },
    correlation_id: 'corr_1',
    in_response_to: 'msg_1',
    to: { id: 'service:central', kind: 'service', trust_domain: 'connectors.test' },
  };
}

function parsed(text: string) {
  const result = parseWire(text);
  if ('error' in result) throw new Error(result.error);
  return result;
}

/** Output values without exponent-form numbers, so that every single-character change alters the canonical bytes. */
const output = fc.jsonValue().filter((value) => !/\d[eE]/.test(JSON.stringify(value)));

describe('signEnvelope / verifyEnvelopeText', () => {
  it('sets from and security.did, writes fields in the reference order, and verifies from the text', () => {
    const { envelope, text } = signEnvelope({ ...envelopeWith({ n: 1.5 }), security: { signature: 'stale', extra: 1 } }, hostKey, host);
    expect(envelope.from).toEqual({ ...host, did: hostKey.did });
    expect(Object.keys(envelope)).toEqual([
      'aip_version',
      'message_type',
      'message_id',
      'sent_at',
      'body',
      'correlation_id',
      'in_response_to',
      'from',
      'to',
      'security',
    ]);
    expect(Object.keys(envelope.security!)).toEqual(['extra', 'did', 'signature']);
    expect(verifyEnvelopeText(parsed(text), hostKey.did)).toBe(true);
    expect(verifyEnvelopeText(parsed(text), otherKey.did)).toBe(false);
  });

  it('round-trips for any output, and any one changed character fails', () => {
    fc.assert(
      fc.property(output, fc.nat(), fc.integer({ min: 0x20, max: 0x7e }), (value, at, code) => {
        const { text } = signEnvelope(envelopeWith(value), hostKey, host);
        expect(verifyEnvelopeText(parsed(text), hostKey.did)).toBe(true);
        const position = at % text.length;
        if (text.charCodeAt(position) === code) return;
        const changed = `${text.slice(0, position)}${String.fromCharCode(code)}${text.slice(position + 1)}`;
        const result = parseWire(changed);
        if ('error' in result) return;
        expect(verifyEnvelopeText(result, hostKey.did)).toBe(false);
      }),
      { seed: SEED, numRuns: 1000 },
    );
  });

  it('sends a fixed point of the reference re-serialisation, for any output (response_roundtrips_reference_serde)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom(undefined, 'sess_1'), (value, session) => {
        const { text } = signEnvelope({ ...envelopeWith(value), session_id: session, trace: null } as Envelope, hostKey, host);
        const again = reserialize.envelope(parsed(text).tree);
        if (!again.ok) throw new Error(again.reason);
        expect(wireJson(again.tree)).toBe(text);
      }),
      { seed: SEED, numRuns: 500 },
    );
  });

  it('refuses an envelope without security, did or signature', () => {
    const { envelope } = signEnvelope(envelopeWith(1), hostKey, host);
    const { signature: _signature, ...unsigned } = envelope.security!;
    for (const value of [
      { ...envelope, security: undefined },
      { ...envelope, security: unsigned },
      { ...envelope, security: { ...unsigned, signature: 7 } },
    ]) {
      expect(verifyEnvelopeText(parsed(JSON.stringify(value)), hostKey.did)).toBe(false);
    }
    expect(verifyEnvelopeText(parsed('[1]'), hostKey.did)).toBe(false);
  });
});

describe('inFieldOrder', () => {
  it('orders the given fields, leaves out undefined and null ones, and drops fields not listed', () => {
    const ordered = inFieldOrder<Record<string, unknown>>({ b: 2, z: 9, a: null, c: undefined, d: [] }, ['d', 'c', 'b', 'a']);
    expect(Object.entries(ordered)).toEqual([
      ['d', []],
      ['b', 2],
    ]);
  });
});
