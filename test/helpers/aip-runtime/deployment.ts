/**
 * Who is who in a test deployment: the central runtime's gateway key and principal, the
 * control plane's key, the registry coordinates a host replica is provisioned with, and the
 * pinned route (`security.connector_route`, §1.3) the central side builds for each action.
 */
import { randomBytes } from 'node:crypto';
import { signingKeyFromSeed, type SigningKey } from '../../../src/host/wire/keys.js';
import type { Principal } from '../../../src/host/wire/envelope.js';

export const TRUST_DOMAIN = 'connectors.test';
export const TENANT_ID = 'tenant-acme';
export const INSTANCE_ID = 'cinst_hermes_acme';
export const VERSION_ID = 'cver_hermes_1';
export const TYPE_ID = 'ctype_hermes_agent';
export const GATEWAY_PRINCIPAL_ID = 'service:getaip:server';
export const CALLBACK_PATH = '/aip/v1/connector-callbacks';
export const CONTROL_PATH = '/aip/v1/connector-control';
export const MESSAGES_PATH = '/aip/v1/messages';
export const NATIVE_HTTP_PROFILE = 'aip.native.http.v1';
export const CANCEL_REASON = 'cancelled by the AIP connector fleet runtime';

/** The 14 keys of the route object, in the order the central side writes them (`connector_route_metadata`). */
export const ROUTE_KEYS = [
  'action_id',
  'capability_id',
  'tenant_id',
  'instance_id',
  'replica_id',
  'version_id',
  'manifest_digest',
  'catalog_revision',
  'binding_policy_revision',
  'credential_revision_ref',
  'quota_policy_ref',
  'replica_health_revision',
  'fence_token',
  'original_mode',
] as const;

export type OriginalMode = 'sync' | 'async' | 'streaming' | null;

export interface ConnectorRoute {
  action_id: string;
  capability_id: string;
  tenant_id: string;
  instance_id: string;
  replica_id: string;
  version_id: string;
  manifest_digest: string;
  catalog_revision: number;
  binding_policy_revision: number;
  credential_revision_ref: string | null;
  quota_policy_ref: string | null;
  replica_health_revision: number;
  fence_token: string;
  original_mode: OriginalMode;
  approval_authorization?: unknown;
}

export interface Party {
  readonly key: SigningKey;
  /** With `did` and `trust_domain`, as `from` carries it. */
  readonly principal: Principal;
}

/** A fresh Ed25519 key (the seed stays inside the key object). */
export function freshKey(): SigningKey {
  return signingKeyFromSeed(randomBytes(32));
}

export function gatewayParty(key: SigningKey = freshKey(), id = GATEWAY_PRINCIPAL_ID): Party {
  return { key, principal: { id, kind: 'service', trust_domain: TRUST_DOMAIN, did: key.did } };
}

export function replicaId(n: number): string {
  return `crepl_hermes_acme_${n}`;
}

/** Lower-case hex of 16 random bytes: the tail of `msg_…`/`act_…`/`route_…` ids the double makes up. */
export function hexId(prefix: string): string {
  return `${prefix}${randomBytes(16).toString('hex')}`;
}
