/**
 * Control-plane messages (`POST /aip/v1/connector-control`): signed JSON, not envelopes. The signature covers
 * the canonical JSON of `request` (ours) or `response` (the control plane's).
 */
import { canonicalJson, type Json, parseWire, wireJson } from './json.js';
import { type SigningKey, verifyWithDid } from './keys.js';
import { fromTimeArray, parseRfc3339, rfc3339 } from './time.js';

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

/** `{request, signature}` with the signature over canonical JSON of `request`; `text` is the body to POST. */
export function signControlRequest(request: object, key: SigningKey): { body: { request: object; signature: string }; text: string } {
  const body = { request, signature: key.sign(canonicalJson(request)) };
  return { body, text: wireJson(body) };
}

function isObject(value: Json | undefined): value is { [k: string]: Json } {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function outcomeProblem(outcome: Json | undefined): string | undefined {
  if (!isObject(outcome)) return 'outcome is not an object';
  switch (outcome['status']) {
    case 'lease': {
      const lease = outcome['lease'];
      if (!isObject(lease) || !Number.isSafeInteger(lease['sequence']) || (lease['sequence'] as number) < 0) return 'lease.sequence is not a u64';
      return fromTimeArray(lease['expires_at']) === undefined ? 'lease.expires_at is not a time array' : undefined;
    }
    case 'offline':
      return undefined;
    case 'rejected':
      return typeof outcome['code'] === 'string' && typeof outcome['message'] === 'string' && typeof outcome['retryable'] === 'boolean'
        ? undefined
        : 'rejected outcome lacks code, message or retryable';
    default:
      return 'unknown outcome status';
  }
}

function responseProblem(response: Json | undefined): string | undefined {
  if (!isObject(response)) return 'response is not an object';
  for (const field of ['request_id', 'issued_at', 'expires_at', 'signer_did'] as const) {
    if (typeof response[field] !== 'string') return `response.${field} is not a string`;
  }
  if (parseRfc3339(response['issued_at'] as string) === undefined || parseRfc3339(response['expires_at'] as string) === undefined) {
    return 'response times are not RFC 3339';
  }
  return outcomeProblem(response['outcome']);
}

/**
 * A control-plane answer checked as the reference host checks it: decodes, `signer_did` is the pinned control DID,
 * the signature verifies over canonical JSON of `response`. Request id and time window are the caller's to compare.
 */
export function verifyControlResponse(text: string, controlDid: string): { ok: true; response: ControlResponse } | { ok: false; reason: string } {
  const parsed = parseWire(text);
  if ('error' in parsed) return { ok: false, reason: `not JSON: ${parsed.error}` };
  if (!isObject(parsed.value)) return { ok: false, reason: 'not an object' };
  const response = parsed.value['response'];
  const signature = parsed.value['signature'];
  const problem = responseProblem(response);
  if (problem !== undefined) return { ok: false, reason: problem };
  if (typeof signature !== 'string') return { ok: false, reason: 'signature is not a string' };
  const typed = response as unknown as ControlResponse;
  if (typed.signer_did !== controlDid) return { ok: false, reason: 'signed by another DID than the control plane' };
  if (!verifyWithDid(controlDid, parsed.canonical([], ['response']), signature)) return { ok: false, reason: 'signature does not verify' };
  return { ok: true, response: typed };
}
