/**
 * The checks of the reference host's `verify_configured_gateway` and `validate_pinned_route`,
 * in its order and with its texts: the signer and sender (401), then recipient, pinned route,
 * action/approval/streaming/cancel coordinates (403). Each refusal is a `connector_host.route_mismatch`.
 */
import type { Envelope, Principal } from './wire/envelope.js';
import { canonicalJson } from './wire/json.js';
import { reserialize } from './wire/reference-types.js';

export type ErrorCategory = 'temporary' | 'permanent' | 'auth' | 'policy' | 'economic' | 'connector' | 'transport';

/** `ProtocolError` of the reference, fields in its declaration order. */
export interface WireProtocolError {
  code: string;
  message: string;
  category: ErrorCategory;
  retryable: boolean;
  retry_after_ms?: number;
  details?: unknown;
  source?: unknown;
}

/** A refusal: the HTTP status and the signed error it answers with. */
export interface Refusal {
  status: number;
  error: WireProtocolError;
}

const MAX_MESSAGE_BYTES = 1024;
const NATIVE_HTTP_PROFILE = 'aip.native.http.v1';

/** The reference's `bounded_detail`: at most 1,024 bytes of UTF-8, cut at a character boundary. */
export function boundedText(text: string): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= MAX_MESSAGE_BYTES) return text;
  let end = MAX_MESSAGE_BYTES;
  // Back up over continuation bytes (10xxxxxx) to the start of the cut character.
  while (end > 0 && ((bytes[end] as number) & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end).toString('utf8');
}

/** A protocol error the host itself raises (`source.component` names the host, as the reference does). */
export function hostError(code: string, message: string, category: ErrorCategory, retryable: boolean, retryAfterMs?: number): WireProtocolError {
  const error: WireProtocolError = { code, message: boundedText(message), category, retryable };
  if (retryAfterMs !== undefined) error.retry_after_ms = retryAfterMs;
  error.source = { component: 'aip-connector-host' };
  return error;
}

const routeMismatch = (status: number, message: string): Refusal => ({
  status,
  error: hostError('connector_host.route_mismatch', message, 'auth', false),
});

/** What the host is pinned to: its own identity, the gateway it trusts, and its registry coordinates. */
export interface PinnedIdentity {
  /** The host principal with its trust_domain and did. */
  host: Principal;
  /** The gateway principal (id, kind, trust_domain). */
  gateway: Principal;
  gatewayDid: string;
  tenantId: string;
  instanceId: string;
  replicaId: string;
  versionId: string;
  manifestDigest: string;
  /** The configured callback endpoint; without it streaming actions are refused. */
  callbackTarget?: string | undefined;
  /** The credential handle this deployment binds to the gateway, when it has one. */
  credential?: { id: string; issuer: string } | undefined;
  /** The provider account this deployment binds to the gateway, when it has one. */
  externalAccount?: { id: string; system: string } | undefined;
}

/** The signer DID the reference verifies with: `security.did`, else `from.did`. */
export function signerDid(envelope: Envelope): string | undefined {
  const did = envelope.security?.did;
  if (typeof did === 'string') return did;
  return envelope.from?.did;
}

/** Check 3 (401): a valid signature by the configured gateway DID, sent from the gateway principal in its trust domain. */
export function checkGateway(envelope: Envelope, signatureValid: (did: string) => boolean, pinned: PinnedIdentity): Refusal | undefined {
  const did = signerDid(envelope);
  if (did === undefined || !signatureValid(did)) return routeMismatch(401, 'connector-host request signature is invalid');
  const sender = envelope.from;
  if (sender === undefined) return routeMismatch(401, 'connector-host request sender is missing');
  const matches =
    did === pinned.gatewayDid &&
    sender.id === pinned.gateway.id &&
    sender.kind === pinned.gateway.kind &&
    sender.trust_domain !== undefined &&
    sender.trust_domain === pinned.gateway.trust_domain &&
    (sender.did === undefined || sender.did === pinned.gatewayDid);
  return matches ? undefined : routeMismatch(401, 'connector-host request signer does not match the configured central gateway');
}

/** What the pinned route allowed, for the checks that follow it. */
export interface PinnedRoute {
  route: Record<string, unknown>;
  /** The capability an action or cancel executes (the route's for a cancel); absent for other bodies. */
  capabilityId?: string;
  /** The pinned credential revision (null: none), for an action or cancel. */
  credentialRevision?: string | null;
  /** The verified approval record an approved action carries. */
  approval?: Record<string, unknown>;
}

/** Checks the approval record against the action (an approval module supplies it). */
export type ApprovalCheck = (record: unknown, action: Record<string, unknown>) => { ok: true; record?: unknown } | { ok: false; reason: string };

/** Checks 4–6e (403): recipient, the route's coordinates, then what the body must agree with. */
export function checkRoute(envelope: Envelope, pinned: PinnedIdentity, checkApproval: ApprovalCheck): Refusal | PinnedRoute {
  if (!recipientMatches(envelope.to, pinned.host)) return routeMismatch(403, 'connector-host request recipient does not match this host');
  const route = asObject(envelope.security?.connector_route);
  if (route === undefined) return routeMismatch(403, 'connector-host request is missing its pinned route');
  const coordinates =
    route.tenant_id === pinned.tenantId &&
    route.instance_id === pinned.instanceId &&
    route.replica_id === pinned.replicaId &&
    route.version_id === pinned.versionId &&
    route.manifest_digest === pinned.manifestDigest;
  if (!coordinates) {
    return routeMismatch(403, 'connector-host request route does not match its admitted instance, replica, version, tenant, or manifest');
  }
  const action = asObject(envelope.body.action);
  if (action !== undefined) return checkActionRoute(envelope, action, route, pinned, checkApproval);
  const cancel = asObject(envelope.body.cancel);
  if (cancel !== undefined) return checkCancelRoute(cancel, route);
  if (route.approval_authorization !== undefined) return routeMismatch(403, 'connector-host approval authorization is valid only for an action');
  return { route };
}

function checkActionRoute(
  envelope: Envelope,
  action: Record<string, unknown>,
  route: Record<string, unknown>,
  pinned: PinnedIdentity,
  checkApproval: ApprovalCheck,
): Refusal | PinnedRoute {
  if (route.action_id !== action.id || route.capability_id !== action.capability_id) {
    return routeMismatch(403, 'connector-host request action or capability does not match its pinned route');
  }
  const approval = checkRouteApproval(action, route, checkApproval);
  if ('refusal' in approval) return approval.refusal;
  const callback = checkCallback(envelope, action, route, pinned);
  if (callback !== undefined) return callback;
  return withCredential(route, action.capability_id as string, approval.record);
}

/** 6b: `approval` on the action ⇔ `approval_authorization` on the route, and the record must authorise this action. */
function checkRouteApproval(
  action: Record<string, unknown>,
  route: Record<string, unknown>,
  checkApproval: ApprovalCheck,
): { refusal: Refusal } | { record: Record<string, unknown> | undefined } {
  const record = route.approval_authorization;
  if (action.approval === undefined) {
    return record === undefined ? { record: undefined } : { refusal: routeMismatch(403, 'connector-host route carries unused approval authorization') };
  }
  if (record === undefined) return { refusal: routeMismatch(403, 'connector-host approved action is missing gateway authorization evidence') };
  const verdict = checkApproval(record, action);
  if (!verdict.ok) return { refusal: routeMismatch(403, `connector-host ${verdict.reason}`) };
  // The record as the reference types hold it: what is imported and turned into the grant.
  return { record: (verdict.record ?? record) as Record<string, unknown> };
}

/** 6c/6d: a streaming action's callback is exactly the configured ingress with the route and our sender; no other action has one. */
function checkCallback(envelope: Envelope, action: Record<string, unknown>, route: Record<string, unknown>, pinned: PinnedIdentity): Refusal | undefined {
  if (action.mode !== 'streaming') {
    return action.callback === undefined ? undefined : routeMismatch(403, 'connector-host non-streaming action must not receive an external callback');
  }
  if (pinned.callbackTarget === undefined) return routeMismatch(403, 'connector-host stream callbacks are not configured');
  const callback = asObject(action.callback);
  if (callback === undefined) return routeMismatch(403, 'connector-host streaming action is missing its central callback');
  const metadata = asObject(callback.metadata);
  const exact =
    route.original_mode === 'streaming' &&
    callback.profile === NATIVE_HTTP_PROFILE &&
    callback.target === pinned.callbackTarget &&
    metadata !== undefined &&
    sameJson(metadata.connector_callback, route) &&
    envelope.from !== undefined &&
    sameJson(typedPrincipal(metadata.connector_callback_recipient), typedPrincipal(envelope.from));
  return exact ? undefined : routeMismatch(403, 'connector-host streaming callback does not match its pinned route and configured central ingress');
}

/** 6e: only an action-scoped cancel of the routed action. */
function checkCancelRoute(cancel: Record<string, unknown>, route: Record<string, unknown>): Refusal | PinnedRoute {
  const target = asObject(cancel.target);
  if (target !== undefined && 'session' in target) return routeMismatch(403, 'connector-host accepts only action-scoped cancellation');
  if (target?.action === undefined || route.action_id !== target.action) {
    return routeMismatch(403, 'connector-host cancellation does not match its pinned action route');
  }
  if (typeof route.capability_id !== 'string') return routeMismatch(403, 'connector-host route is missing capability id');
  return withCredential(route, route.capability_id, undefined);
}

function withCredential(route: Record<string, unknown>, capabilityId: string, approval: Record<string, unknown> | undefined): Refusal | PinnedRoute {
  const revision = route.credential_revision_ref;
  if (revision !== undefined && revision !== null && typeof revision !== 'string') {
    return routeMismatch(403, 'connector-host route contains an invalid credential revision reference');
  }
  const pinnedRoute: PinnedRoute = { route, capabilityId, credentialRevision: revision ?? null };
  if (approval !== undefined) pinnedRoute.approval = approval;
  return pinnedRoute;
}

/** 4: `to` names this host; a trust domain or did, when given, must be ours too. */
function recipientMatches(recipient: Principal | undefined, host: Principal): boolean {
  return (
    recipient !== undefined &&
    recipient.id === host.id &&
    recipient.kind === host.kind &&
    (recipient.trust_domain === undefined || recipient.trust_domain === host.trust_domain) &&
    (recipient.did === undefined || recipient.did === host.did)
  );
}

/** A principal as the reference type holds it (unknown fields, nulls and empty lists gone), for equality; undefined when it is none. */
function typedPrincipal(value: unknown): unknown {
  const typed = reserialize.principal(value);
  return typed.ok ? typed.value : undefined;
}

/** serde_json `Value` equality: the same canonical form. */
function sameJson(a: unknown, b: unknown): boolean {
  return a !== undefined && b !== undefined && canonicalJson(a) === canonicalJson(b);
}

/**
 * The gateway's static identity binding (`validate_identity_lookup_hint`): identity claims on an
 * action are lookup hints that must agree with the host's binding (its tenant, credential handle
 * and external account; no user or human actor), else a 403 with the reference's code.
 */
export function checkIdentityClaims(action: Record<string, unknown>, pinned: PinnedIdentity): Refusal | undefined {
  const claimed = asObject(action.identity);
  if (claimed === undefined) return undefined;
  const tenant = asObject(claimed.tenant)?.id;
  if (tenant !== pinned.tenantId) {
    return identityRefusal(
      'auth.tenant_mismatch',
      `tenant mismatch: requested \`${typeof tenant === 'string' ? tenant : '<none>'}\`, verified \`${pinned.tenantId}\``,
    );
  }
  const credential = asObject(claimed.credential_ref);
  if (credential !== undefined) {
    if (pinned.credential === undefined) return identityRefusal('credential.required', 'a credential is required');
    if (credential.id !== pinned.credential.id || credential.issuer !== pinned.credential.issuer) {
      return identityRefusal('auth.identity_resolution_failed', 'credential lookup hint does not match the trusted directory');
    }
  }
  const account = claimed.external_account;
  const accountDiffers = account !== undefined && account !== null && !sameJson(account, pinned.externalAccount);
  const unbound = ['external_user', 'human_actor', 'acted_on_behalf_of'].some((field) => claimed[field] !== undefined && claimed[field] !== null);
  if (accountDiffers || unbound) return identityRefusal('auth.identity_resolution_failed', 'identity lookup hint does not match the trusted directory');
  return undefined;
}

function identityRefusal(code: string, message: string): Refusal {
  const error = hostError(code, message, 'auth', false);
  error.source = { component: 'aip-gateway.identity-resolution' };
  return { status: 403, error };
}

export function asObject(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}
