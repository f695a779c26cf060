/** Native AIP envelopes (`aip-core` `Envelope`) signed and verified as the reference gateway does. */
import { canonicalJson, type Json, type ParsedWire, wireJson } from './json.js';
import { type SigningKey, verifyWithDid } from './keys.js';

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

const ENVELOPE_FIELDS = [
  'aip_version',
  'message_type',
  'message_id',
  'sent_at',
  'body',
  'session_id',
  'correlation_id',
  'in_response_to',
  'idempotency_key',
  'from',
  'to',
  'trace',
  'security',
  'extensions',
] as const;

const PRINCIPAL_FIELDS = ['id', 'kind', 'display_name', 'trust_domain', 'did', 'external_refs', 'delegated_authority', 'auth_context'] as const;

/** The object's fields in `order`, absent (undefined or null) ones left out, as serde's skip-if-none writes them. */
export function inFieldOrder<T extends object>(object: T, order: readonly (keyof T)[]): T {
  const ordered: Partial<T> = {};
  for (const field of order) {
    const value = object[field];
    if (value !== undefined && value !== null) ordered[field] = value;
  }
  return ordered as T;
}

function principalInOrder(principal: Principal): Principal {
  return inFieldOrder(principal, PRINCIPAL_FIELDS);
}

/**
 * Signs as `sign_native_envelope`: `from` = signer + our did, `security.signature` removed, `security.did` set,
 * Ed25519 over the canonical envelope, the signature put in `security.signature`. `text` is what to send.
 */
export function signEnvelope(envelope: Envelope, key: SigningKey, signer: Principal): { envelope: Envelope; text: string } {
  const { signature: _dropped, ...security } = envelope.security ?? {};
  const unsigned = inFieldOrder<Envelope>(
    {
      ...envelope,
      from: principalInOrder({ ...signer, did: key.did }),
      ...(envelope.to === undefined ? {} : { to: principalInOrder(envelope.to) }),
      security: { ...security, did: key.did },
    },
    ENVELOPE_FIELDS,
  );
  const signed: Envelope = { ...unsigned, security: { ...unsigned.security, signature: key.sign(canonicalJson(unsigned)) } };
  return { envelope: signed, text: wireJson(signed) };
}

function securityOf(value: Json): Record<string, Json> | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const security = value['security'];
  return security !== null && typeof security === 'object' && !Array.isArray(security) ? security : undefined;
}

/**
 * Whether a parsed envelope is signed by `expectedDid`: `security.did` names it and `security.signature` verifies
 * over the canonical form of the received text without that signature (number lexemes re-serialised as serde does).
 */
export function verifyEnvelopeText(parsed: ParsedWire, expectedDid: string): boolean {
  const security = securityOf(parsed.value);
  const signature = security?.['signature'];
  if (security?.['did'] !== expectedDid || typeof signature !== 'string') return false;
  return verifyWithDid(expectedDid, parsed.canonical([['security', 'signature']]), signature);
}
