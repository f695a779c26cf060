/** Native AIP envelopes (`aip-core` `Envelope`) signed and verified as the reference gateway does. */
import { canonicalJson, type ParsedWire, withoutPaths, wireJson } from './json.js';
import { type SigningKey, verifyWithDid } from './keys.js';
import { reserialize } from './reference-types.js';

/** `Principal` of the reference, fields in its declaration order. */
export interface Principal {
  id: string;
  kind: string;
  display_name?: string;
  trust_domain?: string;
  did?: string;
  external_refs?: { system: string; type: string; id: string }[];
  delegated_authority?: { principal_id: string; scopes?: string[]; expires_at?: string; reason?: string }[];
  auth_context?: unknown;
}

/** `Envelope` of the reference, fields in its declaration order (serde writes them in this order). */
export interface Envelope {
  aip_version: '1.0';
  message_type: string;
  message_id: string;
  sent_at: string;
  body: Record<string, unknown>;
  session_id?: string;
  correlation_id?: string;
  in_response_to?: string;
  idempotency_key?: string;
  from?: Principal;
  to?: Principal;
  trace?: unknown;
  security?: Record<string, unknown>;
  extensions?: unknown;
}

/** The object's fields in `order`, absent (undefined or null) ones left out, as serde's skip-if-none writes them. */
export function inFieldOrder<T extends object>(object: T, order: readonly (keyof T)[]): T {
  const ordered: Partial<T> = {};
  for (const field of order) {
    const value = object[field];
    if (value !== undefined && value !== null) ordered[field] = value;
  }
  return ordered as T;
}

/**
 * Signs as `sign_native_envelope`: `from` = signer + our did, `security.signature` removed, `security.did` set,
 * Ed25519 over the canonical form of what the reference types re-serialise, the signature put in `security.signature`.
 * `text` is what to send (a fixed point of that re-serialisation). An envelope the reference types refuse is our bug: it throws.
 */
export function signEnvelope(envelope: Envelope, key: SigningKey, signer: Principal): { envelope: Envelope; text: string } {
  const { signature: _dropped, ...security } = envelope.security ?? {};
  const typed = reserialize.envelope({ ...envelope, from: { ...signer, did: key.did }, security: { ...security, did: key.did } });
  if (!typed.ok) throw new TypeError(`envelope does not fit the reference types: ${typed.reason}`);
  const unsigned = typed.tree as Record<string, unknown> & { security: Record<string, unknown> };
  const signed = { ...unsigned, security: { ...unsigned.security, signature: key.sign(canonicalJson(unsigned)) } };
  return new SignedEnvelope(wireJson(signed));
}

/** A signed envelope's text, parsed only when asked for: the host sends the text and never reads its own answer back. */
class SignedEnvelope {
  constructor(readonly text: string) {}

  get envelope(): Envelope {
    return JSON.parse(this.text) as Envelope;
  }
}

/**
 * The signed text of an envelope. A provider's text may hold a lone surrogate, which has no UTF-8
 * (and so no serde) form: such an envelope is signed again with each one replaced by U+FFFD, as
 * a UTF-8 decoder would have read it, rather than losing the message. Throws when even that fails.
 */
export function signedText(envelope: Envelope, key: SigningKey, signer: Principal): string {
  try {
    return signEnvelope(envelope, key, signer).text;
  } catch {
    return signEnvelope(wellFormed(envelope) as Envelope, key, signer).text;
  }
}

/** The value with every lone surrogate of its strings (and keys) replaced by U+FFFD, as a UTF-8 decoder reads it. */
export function wellFormed(value: unknown): unknown {
  if (typeof value === 'string') return value.toWellFormed();
  if (Array.isArray(value)) return value.map(wellFormed);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [key.toWellFormed(), wellFormed(item)]));
}

/**
 * Whether an envelope already decoded by the reference types (`reserialize.envelope(...).tree`, or `checkEnvelope`)
 * is signed by `expectedDid`: `security.did` names it and `security.signature` verifies over the canonical form
 * without that signature, which is what the reference verifier computes from its typed parse.
 */
export function verifyEnvelopeTree(tree: unknown, expectedDid: string): boolean {
  const security = (tree as { security?: unknown } | null)?.security;
  if (security === null || typeof security !== 'object' || Array.isArray(security)) return false;
  const { did, signature } = security as Record<string, unknown>;
  if (did !== expectedDid || typeof signature !== 'string') return false;
  return verifyWithDid(expectedDid, () => canonicalJson(withoutPaths(tree, [['security', 'signature']])), signature);
}

/** verifyEnvelopeTree on received text: false too when the reference types would not decode it. */
export function verifyEnvelopeText(parsed: ParsedWire, expectedDid: string): boolean {
  const typed = reserialize.envelope(parsed.tree);
  return typed.ok && verifyEnvelopeTree(typed.tree, expectedDid);
}
