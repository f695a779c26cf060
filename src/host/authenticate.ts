/**
 * What the host computes for a message body before it knows the gateway signed it: the reference host's
 * checks 1–3 (`host_message`, `verify_configured_gateway`): the strict parse (axum's 400 text), the envelope
 * schema and decode (400, unsigned), then the signature, signer and sender (401, signed). Everything an
 * unauthenticated peer can make the host do is here, as a function of the bytes, the host's identity and the
 * clock only, so that a large body can be authenticated in a worker thread (`lane.ts`) while the event loop
 * keeps serving. The HTTP status and code of every answer are the reference's, in its order.
 */
import { type PinnedIdentity, checkGateway, hostError } from './checks.js';
import { type Envelope, signedText } from './wire/envelope.js';
import { checkEnvelope } from './wire/envelope-schema.js';
import { messageId } from './wire/ids.js';
import { canonicalJson, type Json, parseWire, plainJson, withoutPaths, wireJson } from './wire/json.js';
import { type SigningKey, verifyWithDid } from './wire/keys.js';
import { rfc3339 } from './wire/time.js';

export const JSON_TYPE = 'application/json';
export const TEXT_TYPE = 'text/plain; charset=utf-8';

export interface MessageAnswer {
  status: number;
  body: string;
  contentType: string;
}

/** Who signs the host's answers, and what it is pinned to. */
export interface AuthenticationContext {
  readonly key: SigningKey;
  readonly pinned: PinnedIdentity;
  readonly now: () => number;
}

/** An answer given before the body was authenticated, with the counters it moves and, when it could not be signed, why. */
export interface EarlyAnswer {
  readonly answer: MessageAnswer;
  readonly counts: ReadonlyArray<'requests_total' | 'rejected_total'>;
  readonly signingError?: string;
}

/** Either the answer (checks 1–3 refused the body), or the request the gateway signed, decoded. */
export type Authentication = { early: EarlyAnswer } | { request: Envelope };

/**
 * Checks 1–3 on a JSON body. `signatureVerified`: the signature was already found valid for these same bytes (by a
 * worker thread), so the canonical form is not built again; the signer and sender are still checked.
 */
export function authenticate(rawBody: Buffer, context: AuthenticationContext, signatureVerified = false): Authentication {
  const parsed = parseWire(rawBody.toString('utf8'));
  if ('error' in parsed) {
    return { early: { answer: { status: 400, body: `Failed to parse the request body as JSON: ${parsed.error}`, contentType: TEXT_TYPE }, counts: [] } };
  }
  const decoded = checkEnvelope(parsed.tree);
  if (!decoded.ok) return { early: { answer: unsignedAnswer(400, decoded.code, decoded.message), counts: ['requests_total', 'rejected_total'] } };
  const { tree } = decoded.envelope;
  // What the signer check and a refusal read, without a plain copy of the body (as costly as its parse).
  const head = envelopeHead(tree as Record<string, unknown>);
  const refusal = checkGateway(head, (did) => signatureVerified || signedBy(tree, did), context.pinned);
  if (refusal !== undefined) {
    const signed = signedAnswer(context, refusal.status, head, 'aip.core.v1.error', { error: { error: refusal.error } });
    return { early: { ...signed, counts: ['requests_total', 'rejected_total'] } };
  }
  return new AuthenticatedRequest(decoded.envelope);
}

/** The request the gateway signed, its plain copy made only when asked for: a worker thread that authenticated the body for the event loop never needs it. */
class AuthenticatedRequest {
  readonly #decoded: { readonly value: Json };

  constructor(decoded: { readonly value: Json }) {
    this.#decoded = decoded;
  }

  get request(): Envelope {
    return this.#decoded.value as unknown as Envelope;
  }
}

/** The fields of a decoded envelope a refusal is correlated with, and the signer's DID: no body. */
function envelopeHead(tree: Record<string, unknown>): Envelope {
  const head: Envelope = {
    aip_version: '1.0',
    message_type: tree.message_type as string,
    message_id: tree.message_id as string,
    sent_at: tree.sent_at as string,
    body: {},
  };
  if (tree.session_id !== undefined) head.session_id = tree.session_id as string;
  if (tree.correlation_id !== undefined) head.correlation_id = tree.correlation_id as string;
  if (tree.from !== undefined) head.from = plainJson(tree.from) as unknown as Envelope['from'];
  const did = (tree.security as { did?: unknown } | undefined)?.did;
  if (typeof did === 'string') head.security = { did };
  return head;
}

/**
 * `verify_native_envelope_signature`: Ed25519 by `did` over the canonical form of the typed re-serialisation
 * without `security.signature` (the did is `security.did`, else `from.did`); the canonical form is built only
 * for a well-formed signature and DID.
 */
function signedBy(tree: unknown, did: string): boolean {
  const signature = (tree as { security?: { signature?: unknown } }).security?.signature;
  return typeof signature === 'string' && verifyWithDid(did, () => canonicalJson(withoutPaths(tree, [['security', 'signature']])), signature);
}

/**
 * The host's signed answer to `request` (`correlate_response`): session and correlation copied, `in_response_to`
 * its message id, `to` its sender. An envelope the reference types refuse even so gets the reference's own answer to
 * a signing failure, a 500 `connector_host.response_signing`, with the error for the log.
 */
export function signedAnswer(
  context: AuthenticationContext,
  httpStatus: number,
  request: Envelope,
  messageType: string,
  body: Record<string, unknown>,
): { answer: MessageAnswer; signingError?: string } {
  const response: Envelope = {
    aip_version: '1.0',
    message_type: messageType,
    message_id: messageId(),
    sent_at: rfc3339(context.now()),
    body,
    ...(request.session_id === undefined ? {} : { session_id: request.session_id }),
    ...(request.correlation_id === undefined ? {} : { correlation_id: request.correlation_id }),
    in_response_to: request.message_id,
    ...(request.from === undefined ? {} : { to: request.from }),
  };
  try {
    return { answer: { status: httpStatus, body: signedText(response, context.key, context.pinned.host), contentType: JSON_TYPE } };
  } catch (error) {
    return {
      answer: unsignedAnswer(500, 'connector_host.response_signing', 'the response could not be signed'),
      signingError: error instanceof Error ? error.name : typeof error,
    };
  }
}

/** The reference's `unsigned_input_error`: a plain error object, no envelope, no signature. */
export function unsignedAnswer(status: number, code: string, message: string): MessageAnswer {
  const error = hostError(code, message, 'permanent', false);
  const body: Json = { error: { code, message: error.message, category: 'permanent', retryable: false } };
  return { status, body: wireJson(body), contentType: JSON_TYPE };
}
