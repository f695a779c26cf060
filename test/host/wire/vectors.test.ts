/** The reference's own signed vectors (fixtures/aip-vectors/samples.jsonl, copied from shared/reference/aip-vectors), reproduced byte for byte. */
import { describe, expect, it } from 'vitest';
import { signControlRequest, verifyControlRequest, verifyControlResponse } from '../../../src/host/wire/control.js';
import { type Envelope, type Principal, signEnvelope, verifyEnvelopeText } from '../../../src/host/wire/envelope.js';
import { canonicalJson, parseWire, wireJson } from '../../../src/host/wire/json.js';
import { parseSeedHex, signingKeyFromSeed, verifyWithDid } from '../../../src/host/wire/keys.js';
import { loadVectors, type Vector } from './vectors.js';

const vectors = loadVectors();
const envelopes = vectors.filter((vector) => vector.name.startsWith('native.'));
const controlRequests = vectors.filter((vector) => vector.name.startsWith('control.request.'));
const controlResponses = vectors.filter((vector) => vector.name.startsWith('control.response.'));

function withoutSignature(document: Record<string, unknown>): Record<string, unknown> {
  const { signature: _signature, ...security } = document['security'] as Record<string, unknown>;
  return { ...document, security };
}

function keyOf(vector: Vector) {
  return signingKeyFromSeed(parseSeedHex(vector.signer_seed_hex)!);
}

describe('the reference vectors', () => {
  it('are all there, with their raw document text', () => {
    expect(vectors.map((vector) => vector.name)).toHaveLength(9);
    expect(envelopes).toHaveLength(2);
    expect(controlRequests).toHaveLength(4);
    expect(controlResponses).toHaveLength(3);
    for (const vector of vectors) expect(JSON.parse(vector.documentText)).toEqual(vector.document);
  });

  it.each(vectors.map((vector) => [vector.name, vector] as const))('%s: the DID of the seed', (_name, vector) => {
    expect(keyOf(vector).did).toBe(vector.signer_did);
  });

  it.each(envelopes.map((vector) => [vector.name, vector] as const))('%s: signing bytes, signature and wire text', (_name, vector) => {
    expect(canonicalJson(withoutSignature(vector.document))).toBe(vector.signing_bytes);
    const key = keyOf(vector);
    expect(key.sign(vector.signing_bytes)).toBe(vector.signature);
    const document = vector.document as unknown as Envelope;
    const { envelope, text } = signEnvelope(document, key, document.from as Principal);
    expect(envelope.security?.['signature']).toBe(vector.signature);
    expect(text).toBe(vector.documentText);
    expect(wireJson(vector.document)).toBe(vector.documentText);
  });

  it.each(envelopes.map((vector) => [vector.name, vector] as const))('%s: verifies from its raw text, and not under another DID', (_name, vector) => {
    const parsed = parseWire(vector.documentText);
    if ('error' in parsed) throw new Error(parsed.error);
    expect(parsed.canonical([['security', 'signature']])).toBe(vector.signing_bytes);
    expect(verifyEnvelopeText(parsed, vector.signer_did)).toBe(true);
    const other = vectors.find((candidate) => candidate.signer_did !== vector.signer_did)!;
    expect(verifyEnvelopeText(parsed, other.signer_did)).toBe(false);
  });

  it.each(controlRequests.map((vector) => [vector.name, vector] as const))('%s: signing bytes, signature and body text', (_name, vector) => {
    const request = vector.document['request'] as object;
    expect(canonicalJson(request)).toBe(vector.signing_bytes);
    const { body, text } = signControlRequest(request, keyOf(vector));
    expect(body.signature).toBe(vector.signature);
    expect(text).toBe(vector.documentText);
    const parsed = parseWire(vector.documentText);
    if ('error' in parsed) throw new Error(parsed.error);
    expect(verifyWithDid(vector.signer_did, parsed.canonical([], ['request']), vector.signature)).toBe(true);
    expect(verifyControlRequest(vector.documentText, vector.signer_did)).toEqual({ ok: true, message: vector.document['request'] });
    const other = vectors.find((candidate) => candidate.signer_did !== vector.signer_did)!;
    expect(verifyControlRequest(vector.documentText, other.signer_did)).toEqual({ ok: false, reason: 'signed by another DID than the replica' });
  });

  it.each(controlResponses.map((vector) => [vector.name, vector] as const))('%s: signing bytes, signature, and verifies from its raw text', (_name, vector) => {
    expect(canonicalJson(vector.document['response'])).toBe(vector.signing_bytes);
    expect(keyOf(vector).sign(vector.signing_bytes)).toBe(vector.signature);
    const verified = verifyControlResponse(vector.documentText, vector.signer_did);
    expect(verified).toEqual({ ok: true, response: vector.document['response'] });
    const other = vectors.find((candidate) => candidate.signer_did !== vector.signer_did)!;
    expect(verifyControlResponse(vector.documentText, other.signer_did)).toEqual({ ok: false, reason: 'signed by another DID than the control plane' });
  });
});

describe('control messages: window, request id and tampering', () => {
  const response = controlResponses.find((vector) => vector.name === 'control.response.lease')!;
  const issuedMs = Date.parse('2026-12-01T21:00:00.12Z');

  it('checks the request id and the reference time window when asked', () => {
    const did = response.signer_did;
    expect(verifyControlResponse(response.documentText, did, { requestId: 'msg_0190a000000070008000000000000002', nowMs: issuedMs + 1000 }).ok).toBe(true);
    expect(verifyControlResponse(response.documentText, did, { requestId: 'msg_other' })).toEqual({ ok: false, reason: 'answers another request id' });
    expect(verifyControlResponse(response.documentText, did, { nowMs: issuedMs - 6000 })).toMatchObject({ ok: false });
    expect(verifyControlResponse(response.documentText, did, { nowMs: issuedMs + 30_000 })).toMatchObject({ ok: false });
  });

  it('refuses a tampered or undecodable answer', () => {
    const did = response.signer_did;
    expect(verifyControlResponse(response.documentText.replace('"sequence":2', '"sequence":3'), did)).toEqual({
      ok: false,
      reason: 'signature does not verify',
    });
    expect(verifyControlResponse(response.documentText.replace('[2026,335,21,0,30,500000000,0,0,0]', '"2026-12-01T21:00:30.5Z"'), did)).toMatchObject({
      ok: false,
    });
    expect(verifyControlResponse('{"response":', did)).toMatchObject({ ok: false });
  });
});
