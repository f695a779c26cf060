/**
 * Control-plane messages (`POST /aip/v1/connector-control`): signed JSON, not envelopes. The signature covers
 * the canonical JSON of `request` (ours) or `response` (the control plane's).
 */
import { canonicalJson, parseWire, wireJson } from './json.js';
import { type SigningKey, verifyWithDid } from './keys.js';
import { reserialize } from './reference-types.js';
import { parseRfc3339, rfc3339 } from './time.js';

export interface ConnectorTopology {
  region: string;
  zone: string;
  capacity_class: string;
}

/** `ConnectorReplica` as a registration carries it; `lease_expires_at` is a 9-integer time array. */
export interface ReplicaRegistration {
  id: string;
  instance_id: string;
  version_id: string;
  endpoint: string;
  peer_principal_id: string;
  peer_principal_kind: string;
  peer_did: string;
  trust_domain: string;
  transport_profile: string;
  topology: ConnectorTopology;
  status: 'ready';
  lease_expires_at: number[];
  capacity: number;
  active_assignments: number;
  health_revision: number;
}

export interface RegisterPayload {
  replica: ReplicaRegistration;
  manifest_digest: string;
  artifact_digest: string;
  tenant_id: string;
  config_revision: number;
  secret_provider_ref: string;
  capability_count: number;
}

export type ControlCommand =
  | { operation: 'register'; payload: RegisterPayload }
  | { operation: 'heartbeat'; payload: { replica_id: string; previous_sequence: number; in_flight: number; connector_ready: boolean } }
  | { operation: 'drain' | 'offline'; payload: { replica_id: string; previous_sequence: number } };

export interface ControlRequest {
  request_id: string;
  issued_at: string;
  expires_at: string;
  signer_did: string;
  command: ControlCommand;
}

export type ControlOutcome =
  | { status: 'lease'; lease: { sequence: number; expires_at: number[] } }
  | { status: 'offline' }
  | { status: 'rejected'; code: string; message: string; retryable: boolean };

export interface ControlResponse {
  request_id: string;
  issued_at: string;
  expires_at: string;
  signer_did: string;
  outcome: ControlOutcome;
}

/** The reference refuses a control request living longer than this. */
export const CONTROL_REQUEST_LIFETIME_MS = 30_000;

/** A request for `command` issued at `nowMs`, valid for the longest lifetime the control plane accepts. */
export function controlRequest(requestId: string, command: ControlCommand, signerDid: string, nowMs: number): ControlRequest {
  return {
    request_id: requestId,
    issued_at: rfc3339(nowMs),
    expires_at: rfc3339(nowMs + CONTROL_REQUEST_LIFETIME_MS),
    signer_did: signerDid,
    command,
  };
}

/**
 * `{request, signature}` with the signature over the canonical JSON of `request` as the reference types re-serialise it;
 * `text` is the body to POST (byte-equal to that re-serialisation). A request they refuse is our bug: it throws.
 */
export function signControlRequest(request: object, key: SigningKey): { body: { request: object; signature: string }; text: string } {
  const typed = reserialize.controlRequest(request);
  if (!typed.ok) throw new TypeError(`control request does not fit the reference types: ${typed.reason}`);
  const signature = key.sign(canonicalJson(typed.tree));
  return { body: { request: typed.value as object, signature }, text: wireJson({ request: typed.tree, signature }) };
}

/** The reference's `validate_control_window` (both directions): issued at most 5 s ahead, not expired, lifetime at most 30 s. */
function controlWindowProblem(message: { issued_at: string; expires_at: string }, nowMs: number): string | undefined {
  const issued = parseRfc3339(message.issued_at) as number;
  const expires = parseRfc3339(message.expires_at) as number;
  if (issued > nowMs + CONTROL_CLOCK_SKEW_MS || expires <= nowMs || expires <= issued) return 'expired or outside the accepted clock skew';
  return expires - issued > CONTROL_REQUEST_LIFETIME_MS ? 'lifetime exceeds 30 s' : undefined;
}

const CONTROL_CLOCK_SKEW_MS = 5_000;

type SignedMessage = { request_id: string; issued_at: string; expires_at: string; signer_did: string };
export type ControlCheck<T> = { ok: true; message: T } | { ok: false; reason: string };

/**
 * A signed control message (`{request|response, signature}`) checked as the reference checks one: it decodes as the
 * reference type, `signer_did` is `expectedDid`, the signature verifies over the canonical re-serialised inner
 * message; with `expect`, also the request id and the time window.
 */
function verifyControlMessage<T extends SignedMessage>(
  text: string,
  member: 'request' | 'response',
  expectedDid: string,
  expect: { requestId?: string; nowMs?: number } = {},
): ControlCheck<T> {
  const parsed = parseWire(text);
  if ('error' in parsed) return { ok: false, reason: `not JSON: ${parsed.error}` };
  const typed = member === 'request' ? reserialize.signedControlRequest(parsed.tree) : reserialize.signedControlResponse(parsed.tree);
  if (!typed.ok) return { ok: false, reason: typed.reason };
  const tree = (typed.tree as Record<string, unknown>)[member];
  const signature = (typed.tree as { signature: string }).signature;
  const message = (typed.value as Record<string, unknown>)[member] as unknown as T;
  if (expect.requestId !== undefined && message.request_id !== expect.requestId) return { ok: false, reason: 'answers another request id' };
  if (message.signer_did !== expectedDid)
    return { ok: false, reason: `signed by another DID than ${member === 'response' ? 'the control plane' : 'the replica'}` };
  const windowProblem = expect.nowMs === undefined ? undefined : controlWindowProblem(message, expect.nowMs);
  if (windowProblem !== undefined) return { ok: false, reason: windowProblem };
  if (!verifyWithDid(expectedDid, canonicalJson(tree), signature)) return { ok: false, reason: 'signature does not verify' };
  return { ok: true, message };
}

export type ControlResponseCheck = { ok: true; response: ControlResponse } | { ok: false; reason: string };

/** A control-plane answer checked as the reference host checks it (`send_signed_body`): signed by the pinned control DID. */
export function verifyControlResponse(text: string, controlDid: string, expect?: { requestId?: string; nowMs?: number }): ControlResponseCheck {
  const checked = verifyControlMessage<ControlResponse>(text, 'response', controlDid, expect);
  return checked.ok ? { ok: true, response: checked.message } : checked;
}

/** A host's control request checked as the reference control plane checks it (`process_connector_host_control`): signed by the replica's DID. */
export function verifyControlRequest(text: string, replicaDid: string, expect?: { nowMs?: number }): ControlCheck<ControlRequest> {
  return verifyControlMessage<ControlRequest>(text, 'request', replicaDid, expect);
}
