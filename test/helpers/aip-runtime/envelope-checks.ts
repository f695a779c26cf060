/**
 * Checks the central side makes on every envelope a host signs (responses and stream
 * chunks), each returning a problem sentence or undefined so that a failure names itself.
 */
import { isDeepStrictEqual } from 'node:util';
import type { Principal } from '../../../src/host/wire/envelope.js';
import { verifyEnvelopeText } from '../../../src/host/wire/envelope.js';
import type { Json, parseWire } from '../../../src/host/wire/json.js';
import { reserialize } from '../../../src/host/wire/reference-types.js';
import { parseRfc3339 } from '../../../src/host/wire/time.js';

export type ParsedWire = Extract<ReturnType<typeof parseWire>, { value: Json }>;
export type Problem = string | undefined;

export interface NamedCheck {
  name: string;
  ok: boolean;
  detail?: string;
}

export function check(name: string, problem: Problem): NamedCheck {
  return problem === undefined ? { name, ok: true } : { name, ok: false, detail: problem };
}

/** `security.did` is the pinned DID and the signature verifies over the canonical envelope. */
export function signatureProblem(parsed: ParsedWire, did: string): Problem {
  const security = (parsed.value as Record<string, any>)['security'];
  if (security?.['did'] !== did) return `security.did is ${JSON.stringify(security?.['did'])}, not the pinned ${did}`;
  return verifyEnvelopeText(parsed, did) ? undefined : 'the signature does not verify over the canonical envelope';
}

/** The raw JSON equals, as a value, its re-serialisation through the reference types. */
export function roundtripProblem(value: Json): Problem {
  const again = reserialize.envelope(value);
  if (!again.ok) return `does not decode as the reference Envelope: ${again.reason}`;
  return isDeepStrictEqual(again.value, value)
    ? undefined
    : `re-serialises differently: sent ${JSON.stringify(value)}, reference ${JSON.stringify(again.value)}`;
}

export function sentAtProblem(sentAt: unknown, now: number, pastMs: number, futureMs: number): Problem {
  const at = typeof sentAt === 'string' ? parseRfc3339(sentAt) : undefined;
  if (at === undefined) return `sent_at ${JSON.stringify(sentAt)} is not RFC 3339`;
  if (at < now - pastMs || at > now + futureMs) return `sent_at ${sentAt} is outside [now - ${pastMs} ms, now + ${futureMs} ms]`;
  return undefined;
}

/** Equal on the given principal fields (absent on both sides counts as equal). */
export function principalProblem(what: string, actual: unknown, expected: Principal, fields: Array<keyof Principal>): Problem {
  const got = (actual ?? {}) as Record<string, unknown>;
  const differing = fields.filter((field) => got[field] !== expected[field]);
  if (differing.length === 0) return undefined;
  return `${what} ${differing.map((field) => `${field}=${JSON.stringify(got[field])} (expected ${JSON.stringify(expected[field])})`).join(', ')}`;
}
