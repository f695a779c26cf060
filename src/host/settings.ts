/**
 * The host's settings: the reference bootstrap's `AIP_CONNECTOR_HOST_*` variables, with its names,
 * defaults and meanings, validated before anything listens. Every problem is a `HostSettingError`
 * naming the variable; no message ever quotes a secret (the seed, the database URL).
 */
import { isIP } from 'node:net';
import { isLoopbackAddress, isLoopbackHost } from '../internal/loopback.js';
import { readOwnedFile as readOwnedFileOf } from '../internal/owned-file.js';
import { Secret } from '../internal/secret.js';
import { isDidKey, parseSeedHex, type SigningKey, signingKeyFromSeed } from './wire/keys.js';

export const HOST_ENV_PREFIX = 'AIP_CONNECTOR_HOST_';

/** A bad setting: `variable` is the full variable name, `problem` says what is wrong without quoting a secret. */
export class HostSettingError extends Error {
  readonly variable: string;
  readonly problem: string;

  constructor(variable: string, problem: string) {
    super(`${variable}: ${problem}`);
    this.name = 'HostSettingError';
    this.variable = variable;
    this.problem = problem;
  }
}

export interface HostLimits {
  readonly maxInFlight: number;
  readonly leaseTtlMs: number;
  readonly heartbeatMs: number;
  readonly drainTimeoutMs: number;
  readonly healthTimeoutMs: number;
  readonly controlTimeoutMs: number;
  /** The native AIP request body limit (the reference's DEFAULT_MAX_REQUEST_BYTES; no variable sets it). */
  readonly maxRequestBytes: number;
  /** Ours, not the reference's: connections held at once (AIP_CONNECTOR_HOST_MAX_CONNECTIONS). */
  readonly maxConnections: number;
  /** Ours: bytes of large bodies held at once, from their reading to their answer (AIP_CONNECTOR_HOST_BODY_BUDGET_BYTES). */
  readonly bodyBudgetBytes: number;
  /** Ours, fixed: a body over this size is large (read within the budget, authenticated in the worker thread). */
  readonly largeBodyBytes: number;
  /** Ours, fixed: the old-generation heap of the worker thread that authenticates large bodies, in MB. */
  readonly authenticationHeapMb: number;
}

/** Past the drain timeout, until the exit: stopping the server, `offline`, closing the connector and its ledger (the reference's 5 s). */
export const SHUTDOWN_MARGIN_MS = 5_000;

/** The longest the host takes from SIGTERM to its exit: what a termination grace period must cover. */
export function shutdownBudgetMs(limits: Pick<HostLimits, 'drainTimeoutMs'>): number {
  return limits.drainTimeoutMs + SHUTDOWN_MARGIN_MS;
}

/** An outbound target (callbacks, provider events) and its network exceptions. */
export interface OutboundTarget {
  readonly url: string;
  readonly allowHttp: boolean;
  readonly allowPrivate: boolean;
}

export interface CredentialBinding {
  readonly id: string;
  readonly issuer: string;
  readonly scopes: readonly string[];
  readonly revisionRef: string;
}

export interface HostSettings {
  readonly bind: { readonly host: string; readonly port: number; readonly text: string };
  readonly publicEndpoint: string;
  readonly controlEndpoint: string;
  readonly controlDid: string;
  readonly allowLoopbackHttp: boolean;
  readonly callback?: OutboundTarget;
  readonly events?: OutboundTarget;
  /** The host's Ed25519 key (from the seed file); it never serialises or inspects its private half. */
  readonly signingKey: SigningKey;
  /** The PostgreSQL URL read from AIP_CONNECTOR_HOST_DATABASE_URL_FILE, when that variable is set. */
  readonly databaseUrl?: Secret;
  readonly gatewayPrincipalId: string;
  readonly gatewayDid: string;
  readonly trustDomain: string;
  readonly tlsCaPem?: string;
  readonly typeId: string;
  readonly versionId: string;
  readonly instanceId: string;
  readonly replicaId: string;
  readonly tenantId: string;
  readonly tenantSystem?: string;
  readonly membershipId: string;
  readonly externalAccount?: { readonly id: string; readonly system: string };
  readonly topology: { readonly region: string; readonly zone: string; readonly capacity_class: string };
  readonly artifactDigest: string;
  readonly secretProviderRef: string;
  readonly configRevision: number;
  readonly credential?: CredentialBinding;
  readonly credentialPolicyFile?: string;
  readonly limits: HostLimits;
}

/** Every variable the host reads, with its default ('' when it has none) and meaning: the operator's table. */
export const HOST_VARIABLES: ReadonlyArray<{ name: string; default: string; meaning: string }> = [
  { name: 'BIND', default: '0.0.0.0:8081', meaning: 'listen address (ip:port, [ipv6]:port)' },
  {
    name: 'PUBLIC_ENDPOINT',
    default: '',
    meaning: 'the URL the runtime POSTs to; ends exactly in /aip/v1/messages; https unless loopback with ALLOW_LOOPBACK_HTTP',
  },
  { name: 'CONTROL_ENDPOINT', default: '', meaning: 'the control plane, ending exactly in /aip/v1/connector-control' },
  { name: 'CONTROL_DID', default: '', meaning: "the control plane's did:key (or CONTROL_DID_FILE, not both)" },
  { name: 'CONTROL_DID_FILE', default: '', meaning: "owner-only file holding the control plane's did:key" },
  { name: 'CALLBACK_ENDPOINT', default: '', meaning: 'stream-chunk target, ending exactly in /aip/v1/connector-callbacks (needed for streaming actions)' },
  { name: 'CALLBACK_ALLOW_HTTP', default: 'false', meaning: 'allow http:// for the callback endpoint' },
  { name: 'CALLBACK_ALLOW_PRIVATE', default: 'false', meaning: 'allow a loopback/private callback address' },
  { name: 'EVENT_ENDPOINT', default: '', meaning: 'provider-event target, ending exactly in /aip/v1/connector-events' },
  { name: 'EVENT_ALLOW_HTTP', default: 'false', meaning: 'allow http:// for the event endpoint' },
  { name: 'EVENT_ALLOW_PRIVATE', default: 'false', meaning: 'allow a loopback/private event address' },
  { name: 'ALLOW_LOOPBACK_HTTP', default: 'false', meaning: 'allow http:// public and control endpoints on loopback (the bind address must be loopback too)' },
  { name: 'SIGNING_SEED_FILE', default: '', meaning: "owner-only file holding the host's 32-byte Ed25519 seed as 64 hex characters" },
  { name: 'DATABASE_URL_FILE', default: '', meaning: 'owner-only file holding the PostgreSQL URL of the run ledger (else the config ledger / HERMES_LEDGER)' },
  { name: 'GATEWAY_PRINCIPAL_ID', default: '', meaning: "the central gateway's principal id (kind service)" },
  { name: 'GATEWAY_DID', default: '', meaning: "the gateway's did:key (or GATEWAY_DID_FILE, not both)" },
  { name: 'GATEWAY_DID_FILE', default: '', meaning: "owner-only file holding the gateway's did:key" },
  { name: 'TLS_CA_FILE', default: '', meaning: 'one extra PEM root for the control, callback and event endpoints (not group/world writable, at most 1 MiB)' },
  { name: 'TRUST_DOMAIN', default: '', meaning: 'trust domain shared by gateway and host' },
  { name: 'TYPE_ID', default: '', meaning: 'admitted connector type id (ctype_...)' },
  { name: 'VERSION_ID', default: '', meaning: 'admitted connector version id (cver_...)' },
  { name: 'INSTANCE_ID', default: '', meaning: 'connector instance id (cinst_...)' },
  { name: 'REPLICA_ID', default: '', meaning: 'this replica id (crepl_...)' },
  { name: 'TENANT_ID', default: '', meaning: 'the verified tenant this instance serves' },
  { name: 'TENANT_SYSTEM', default: '', meaning: "the tenant reference's source system (optional)" },
  { name: 'MEMBERSHIP_ID', default: '', meaning: 'stable membership assertion of this instance' },
  { name: 'EXTERNAL_ACCOUNT_ID', default: '', meaning: 'account id in the external product (with EXTERNAL_ACCOUNT_SYSTEM)' },
  { name: 'EXTERNAL_ACCOUNT_SYSTEM', default: '', meaning: 'the external product (with EXTERNAL_ACCOUNT_ID)' },
  { name: 'REGION', default: 'global', meaning: 'topology region' },
  { name: 'ZONE', default: 'default', meaning: 'topology zone' },
  { name: 'CAPACITY_CLASS', default: 'standard', meaning: 'topology capacity class' },
  { name: 'ARTIFACT_DIGEST', default: '', meaning: 'sha256:<64 hex> of the running artifact' },
  { name: 'SECRET_PROVIDER_REF', default: '', meaning: 'opaque, non-secret reference to the secret provider' },
  { name: 'CONFIG_REVISION', default: '1', meaning: 'instance configuration revision (> 0)' },
  { name: 'CREDENTIAL_ID', default: '', meaning: 'credential handle id (with ISSUER, SCOPES, REVISION)' },
  { name: 'CREDENTIAL_ISSUER', default: '', meaning: 'credential handle issuer' },
  { name: 'CREDENTIAL_SCOPES', default: '', meaning: 'credential scopes, comma-separated' },
  { name: 'CREDENTIAL_REVISION', default: '', meaning: 'credential revision pinned to new routes' },
  { name: 'CREDENTIAL_POLICY_FILE', default: '', meaning: 'JSON rotation/revocation policy, re-read before each action' },
  { name: 'MAX_IN_FLIGHT', default: '32', meaning: 'concurrent actions (429 connector_host.capacity beyond)' },
  { name: 'LEASE_TTL_MS', default: '30000', meaning: 'lease lifetime, 1000 to 300000' },
  { name: 'HEARTBEAT_MS', default: '10000', meaning: 'heartbeat interval, at most half the lease TTL' },
  { name: 'DRAIN_TIMEOUT_MS', default: '20000', meaning: 'how long SIGTERM waits for in-flight actions, 1 to 300000' },
  { name: 'HEALTH_TIMEOUT_MS', default: '2000', meaning: 'readiness probe deadline, 1 to 30000' },
  { name: 'CONTROL_TIMEOUT_MS', default: '5000', meaning: 'control-plane request deadline, 1 to 30000' },
  { name: 'MAX_CONNECTIONS', default: '2048', meaning: 'ours: connections held at once (a new one beyond is closed on accept), 1 to 1000000' },
  {
    name: 'BODY_BUDGET_BYTES',
    default: '33554432',
    meaning: 'ours: bytes of message bodies over 64 KiB held at once (a larger body waits, unread, for its share), 4194304 to 1073741824',
  },
];

const MAX_REQUEST_BYTES = 4 * 1024 * 1024;
const LARGE_BODY_BYTES = 64 * 1024;
const AUTHENTICATION_HEAP_MB = 256;
const MAX_SEED_FILE_BYTES = 256;
const MAX_DATABASE_URL_BYTES = 16 * 1024;
const MAX_DID_FILE_BYTES = 512;
const MAX_TLS_CA_BYTES = 1024 * 1024;
const MAX_CREDENTIAL_POLICY_BYTES = 64 * 1024;

type Env = NodeJS.ProcessEnv;

/** Reads and validates every host variable of `env`; throws the first HostSettingError. */
export function loadHostSettings(env: Env = process.env): HostSettings {
  const read = reader(env);
  const allowLoopbackHttp = read.flag('ALLOW_LOOPBACK_HTTP');
  const bind = parseBind(read.text('BIND') ?? '0.0.0.0:8081');
  if (allowLoopbackHttp && !isLoopbackAddress(bind.host)) {
    throw new HostSettingError(name('ALLOW_LOOPBACK_HTTP'), 'loopback HTTP exceptions require a loopback AIP_CONNECTOR_HOST_BIND address');
  }
  const tenantId = read.bounded('TENANT_ID', 512);
  const settings: HostSettings = {
    bind,
    publicEndpoint: endpointUrl('PUBLIC_ENDPOINT', read.required('PUBLIC_ENDPOINT'), '/aip/v1/messages', allowLoopbackHttp),
    controlEndpoint: endpointUrl('CONTROL_ENDPOINT', read.required('CONTROL_ENDPOINT'), '/aip/v1/connector-control', allowLoopbackHttp),
    controlDid: read.did('CONTROL_DID'),
    allowLoopbackHttp,
    ...optional('callback', outboundTarget(read, 'CALLBACK', '/aip/v1/connector-callbacks')),
    ...optional('events', outboundTarget(read, 'EVENT', '/aip/v1/connector-events')),
    signingKey: loadSigningKey(env),
    ...optional('databaseUrl', databaseUrl(read)),
    gatewayPrincipalId: read.bounded('GATEWAY_PRINCIPAL_ID', 512),
    gatewayDid: read.did('GATEWAY_DID'),
    trustDomain: read.bounded('TRUST_DOMAIN', 253),
    ...optional('tlsCaPem', tlsCa(read)),
    typeId: read.registryId('TYPE_ID', 'ctype_'),
    versionId: read.registryId('VERSION_ID', 'cver_'),
    instanceId: read.registryId('INSTANCE_ID', 'cinst_'),
    replicaId: read.registryId('REPLICA_ID', 'crepl_'),
    tenantId,
    ...optional('tenantSystem', read.text('TENANT_SYSTEM')),
    membershipId: read.bounded('MEMBERSHIP_ID', 512),
    ...optional('externalAccount', externalAccount(read)),
    topology: { region: read.text('REGION') ?? 'global', zone: read.text('ZONE') ?? 'default', capacity_class: read.text('CAPACITY_CLASS') ?? 'standard' },
    artifactDigest: sha256Digest(read.required('ARTIFACT_DIGEST')),
    secretProviderRef: read.bounded('SECRET_PROVIDER_REF', 2048),
    configRevision: read.integer('CONFIG_REVISION', 1, 1, Number.MAX_SAFE_INTEGER),
    ...optional('credential', credentialBinding(read)),
    ...optional('credentialPolicyFile', read.text('CREDENTIAL_POLICY_FILE')),
    limits: limits(read),
  };
  if (settings.credentialPolicyFile !== undefined) {
    const policy = loadCredentialPolicy(settings.credentialPolicyFile);
    if (!revisionAuthorized(policy, settings.credential?.revisionRef)) {
      throw new HostSettingError(name('CREDENTIAL_POLICY_FILE'), 'the policy does not authorise the configured AIP_CONNECTOR_HOST_CREDENTIAL_REVISION');
    }
  }
  return settings;
}

/** The credential rotation policy: which pinned revisions a route may carry. */
export interface CredentialPolicy {
  readonly current_revision_ref: string | null;
  readonly accepted_previous_revisions: readonly string[];
  readonly revoked_revisions: readonly string[];
}

const POLICY_FIELDS = ['current_revision_ref', 'accepted_previous_revisions', 'revoked_revisions'];

/**
 * Reads and validates the policy file (not group/world writable, at most 64 KiB, only the three
 * fields, revisions of 1 to 256 bytes, no revision in two lists). Re-read before each action.
 */
export function loadCredentialPolicy(path: string): CredentialPolicy {
  const variable = name('CREDENTIAL_POLICY_FILE');
  let document: unknown;
  try {
    document = JSON.parse(readOwnedFile(variable, path, MAX_CREDENTIAL_POLICY_BYTES, 'public'));
  } catch (error) {
    if (error instanceof HostSettingError) throw error;
    throw new HostSettingError(variable, 'the file is not valid JSON');
  }
  const shape = 'the file must be { "current_revision_ref": string|null, "accepted_previous_revisions": [string], "revoked_revisions": [string] }';
  if (typeof document !== 'object' || document === null || Array.isArray(document)) throw new HostSettingError(variable, shape);
  const record = document as Record<string, unknown>;
  if (Object.keys(record).some((key) => !POLICY_FIELDS.includes(key))) throw new HostSettingError(variable, shape);
  const current = record['current_revision_ref'] ?? null;
  const previous = record['accepted_previous_revisions'] ?? [];
  const revoked = record['revoked_revisions'] ?? [];
  const revision = (value: unknown): value is string => typeof value === 'string' && value.trim() !== '' && Buffer.byteLength(value) <= 256;
  if ((current !== null && !revision(current)) || !Array.isArray(previous) || !Array.isArray(revoked) || ![...previous, ...revoked].every(revision)) {
    throw new HostSettingError(variable, shape);
  }
  const overlapping = (current !== null && (previous.includes(current) || revoked.includes(current))) || previous.some((entry) => revoked.includes(entry));
  if (overlapping) throw new HostSettingError(variable, 'a revision appears in more than one of current, previous and revoked');
  return { current_revision_ref: current, accepted_previous_revisions: previous, revoked_revisions: revoked };
}

/** Whether a route's pinned revision (undefined/null: none) is accepted by the policy. */
export function revisionAuthorized(policy: CredentialPolicy, pinned: string | null | undefined): boolean {
  if (pinned === undefined || pinned === null) return policy.current_revision_ref === null && policy.accepted_previous_revisions.length === 0;
  if (policy.revoked_revisions.includes(pinned)) return false;
  return policy.current_revision_ref === pinned || policy.accepted_previous_revisions.includes(pinned);
}

/** Only the signing key (what `hermes-aip host --print-did` needs). */
export function loadSigningKey(env: Env = process.env): SigningKey {
  const variable = name('SIGNING_SEED_FILE');
  const path = reader(env).required('SIGNING_SEED_FILE');
  const seed = parseSeedHex(readOwnedFile(variable, path, MAX_SEED_FILE_BYTES, 'secret').trim());
  if (seed === undefined) throw new HostSettingError(variable, 'the file must hold exactly 64 hexadecimal characters (a 32-byte Ed25519 seed)');
  try {
    return signingKeyFromSeed(seed);
  } finally {
    seed.fill(0);
  }
}

function name(short: string): string {
  return `${HOST_ENV_PREFIX}${short}`;
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

/** Typed access to the variables; an empty value counts as unset, like clap's env handling of empty values. */
function reader(env: Env) {
  const text = (short: string): string | undefined => {
    const value = env[name(short)];
    return value === undefined || value === '' ? undefined : value;
  };
  const required = (short: string): string => {
    const value = text(short);
    if (value === undefined) throw new HostSettingError(name(short), 'is required');
    return value;
  };
  return {
    text,
    required,
    bounded(short: string, maxBytes: number): string {
      const value = required(short);
      if (value.trim() === '' || Buffer.byteLength(value) > maxBytes) throw new HostSettingError(name(short), `must contain 1 to ${maxBytes} bytes`);
      return value;
    },
    flag(short: string): boolean {
      const value = text(short);
      if (value === undefined) return false;
      if (value === 'true' || value === '1') return true;
      if (value === 'false' || value === '0') return false;
      throw new HostSettingError(name(short), 'must be true or false');
    },
    integer(short: string, fallback: number, min: number, max: number): number {
      const value = text(short);
      if (value === undefined) return fallback;
      if (!/^\d{1,16}$/.test(value) || Number(value) < min || Number(value) > max) {
        throw new HostSettingError(name(short), `must be an integer from ${min} to ${max}`);
      }
      return Number(value);
    },
    registryId(short: string, prefix: string): string {
      const value = required(short);
      if (!value.startsWith(prefix) || value.length === prefix.length || Buffer.byteLength(value) > 512 || /[\s\p{Cc}]/u.test(value)) {
        throw new HostSettingError(name(short), `must be an id starting with ${prefix} (at most 512 bytes, no spaces)`);
      }
      return value;
    },
    /** A did:key given inline (VARIABLE) or in an owner-only file (VARIABLE_FILE), exactly one of them. */
    did(short: string): string {
      const inline = text(short);
      const file = text(`${short}_FILE`);
      if (inline !== undefined && file !== undefined) throw new HostSettingError(name(short), `give it inline or by ${name(`${short}_FILE`)}, not both`);
      if (inline === undefined && file === undefined) throw new HostSettingError(name(short), `is required (or ${name(`${short}_FILE`)})`);
      const variable = inline === undefined ? name(`${short}_FILE`) : name(short);
      const did = inline === undefined ? readOwnedFile(variable, file as string, MAX_DID_FILE_BYTES, 'secret').trim() : inline.trim();
      if (!isDidKey(did)) throw new HostSettingError(variable, 'must be an Ed25519 did:key (did:key:z6Mk...)');
      return did;
    },
  };
}

type Reader = ReturnType<typeof reader>;

function parseBind(text: string): HostSettings['bind'] {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|(\d{1,3}(?:\.\d{1,3}){3})):(\d{1,5})$/.exec(text);
  const host = match?.[1] ?? match?.[2];
  const port = Number(match?.[3]);
  if (host === undefined || isIP(host) === 0 || !(port >= 0 && port <= 65535)) {
    throw new HostSettingError(name('BIND'), 'must be an IP socket address such as 0.0.0.0:8081 or [::1]:8081');
  }
  return { host, port, text };
}

/** Literal private, link-local or loopback addresses (names are not resolved at startup). */
function isPrivateHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (isLoopbackHost(host)) return true;
  if (isIP(host) === 4) return /^(10\.|192\.168\.|169\.254\.|0\.|172\.(1[6-9]|2\d|3[01])\.)/.test(host);
  if (isIP(host) === 6) return /^(f[cd]|fe[89ab])/.test(host) || host === '::';
  return false;
}

/** The URL, absolute, with no userinfo, query or fragment, and exactly `path`. */
function exactUrl(variable: string, text: string, path: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new HostSettingError(variable, 'must be an absolute URL');
  }
  if (url.hostname === '' || url.username !== '' || url.password !== '' || text.includes('?') || text.includes('#') || url.pathname !== path) {
    throw new HostSettingError(variable, `must be an absolute URL ending exactly in ${path}, without credentials, query or fragment`);
  }
  return url;
}

/** The public and control endpoints: https, or http on a loopback host with ALLOW_LOOPBACK_HTTP. */
function endpointUrl(short: string, text: string, path: string, allowLoopbackHttp: boolean): string {
  const variable = name(short);
  const url = exactUrl(variable, text, path);
  if (url.protocol === 'https:') return url.href;
  if (url.protocol === 'http:' && allowLoopbackHttp && isLoopbackHost(url.hostname)) return url.href;
  throw new HostSettingError(variable, `requires https, except http on a loopback host with ${name('ALLOW_LOOPBACK_HTTP')}=true`);
}

/** CALLBACK_* / EVENT_*: the endpoint and its exceptions; exceptions without an endpoint are refused. */
function outboundTarget(read: Reader, prefix: 'CALLBACK' | 'EVENT', path: string): OutboundTarget | undefined {
  const allowHttp = read.flag(`${prefix}_ALLOW_HTTP`);
  const allowPrivate = read.flag(`${prefix}_ALLOW_PRIVATE`);
  const text = read.text(`${prefix}_ENDPOINT`);
  const variable = name(`${prefix}_ENDPOINT`);
  if (text === undefined) {
    if (allowHttp || allowPrivate) throw new HostSettingError(variable, `is required when ${prefix}_ALLOW_HTTP or ${prefix}_ALLOW_PRIVATE is set`);
    return undefined;
  }
  const url = exactUrl(variable, text, path);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && allowHttp)) {
    throw new HostSettingError(variable, `requires https, or http with ${name(`${prefix}_ALLOW_HTTP`)}=true`);
  }
  if (isPrivateHost(url.hostname) && !allowPrivate) {
    throw new HostSettingError(variable, `is a loopback or private address; set ${name(`${prefix}_ALLOW_PRIVATE`)}=true to allow it`);
  }
  return { url: url.href, allowHttp, allowPrivate };
}

function databaseUrl(read: Reader): Secret | undefined {
  const path = read.text('DATABASE_URL_FILE');
  if (path === undefined) return undefined;
  const variable = name('DATABASE_URL_FILE');
  const url = readOwnedFile(variable, path, MAX_DATABASE_URL_BYTES, 'secret').trim();
  if (url === '') throw new HostSettingError(variable, 'the file is empty');
  if (!/^postgres(?:ql)?:\/\/\S+$/.test(url)) throw new HostSettingError(variable, 'the file must hold a postgres:// or postgresql:// URL');
  return new Secret(url);
}

function tlsCa(read: Reader): string | undefined {
  const path = read.text('TLS_CA_FILE');
  if (path === undefined) return undefined;
  const variable = name('TLS_CA_FILE');
  const pem = readOwnedFile(variable, path, MAX_TLS_CA_BYTES, 'public');
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) throw new HostSettingError(variable, 'the file must hold a PEM certificate');
  return pem;
}

function externalAccount(read: Reader): HostSettings['externalAccount'] {
  const id = read.text('EXTERNAL_ACCOUNT_ID');
  const system = read.text('EXTERNAL_ACCOUNT_SYSTEM');
  if (id === undefined && system === undefined) return undefined;
  if (id === undefined || system === undefined)
    throw new HostSettingError(
      name(id === undefined ? 'EXTERNAL_ACCOUNT_ID' : 'EXTERNAL_ACCOUNT_SYSTEM'),
      'external account id and system must be configured together',
    );
  return { id: read.bounded('EXTERNAL_ACCOUNT_ID', 512), system: read.bounded('EXTERNAL_ACCOUNT_SYSTEM', 128) };
}

function credentialBinding(read: Reader): CredentialBinding | undefined {
  const id = read.text('CREDENTIAL_ID');
  const issuer = read.text('CREDENTIAL_ISSUER');
  const revisionRef = read.text('CREDENTIAL_REVISION');
  const scopesText = read.text('CREDENTIAL_SCOPES');
  if (id === undefined && issuer === undefined && revisionRef === undefined && scopesText === undefined) return undefined;
  if (id === undefined || issuer === undefined || revisionRef === undefined) {
    throw new HostSettingError(name('CREDENTIAL_ID'), 'credential id, issuer, revision and scopes must be configured together');
  }
  const scopes = [...new Set((scopesText ?? '').split(',').map((scope) => scope.trim()))].sort();
  if (scopes.length === 0 || scopes.includes('')) throw new HostSettingError(name('CREDENTIAL_SCOPES'), 'credential handles need at least one non-empty scope');
  if (revisionRef.trim() === '' || Buffer.byteLength(revisionRef) > 256) throw new HostSettingError(name('CREDENTIAL_REVISION'), 'must contain 1 to 256 bytes');
  return { id, issuer, scopes, revisionRef };
}

function sha256Digest(value: string): string {
  if (!/^sha256:[0-9a-fA-F]{64}$/.test(value)) throw new HostSettingError(name('ARTIFACT_DIGEST'), 'must be a sha256 digest (sha256: and 64 hex characters)');
  return value;
}

function limits(read: Reader): HostLimits {
  const leaseTtlMs = read.integer('LEASE_TTL_MS', 30_000, 1_000, 300_000);
  const heartbeatMs = read.integer('HEARTBEAT_MS', 10_000, 1, Number.MAX_SAFE_INTEGER);
  if (heartbeatMs * 2 > leaseTtlMs) throw new HostSettingError(name('HEARTBEAT_MS'), 'must be at most half of AIP_CONNECTOR_HOST_LEASE_TTL_MS');
  return {
    maxInFlight: read.integer('MAX_IN_FLIGHT', 32, 1, 4_294_967_295),
    leaseTtlMs,
    heartbeatMs,
    // Not the reference's 30 s: with the shutdown margin the host must exit within Kubernetes' default 30 s grace.
    drainTimeoutMs: read.integer('DRAIN_TIMEOUT_MS', 20_000, 1, 300_000),
    healthTimeoutMs: read.integer('HEALTH_TIMEOUT_MS', 2_000, 1, 30_000),
    controlTimeoutMs: read.integer('CONTROL_TIMEOUT_MS', 5_000, 1, 30_000),
    maxRequestBytes: MAX_REQUEST_BYTES,
    maxConnections: read.integer('MAX_CONNECTIONS', 2_048, 1, 1_000_000),
    bodyBudgetBytes: read.integer('BODY_BUDGET_BYTES', 32 * 1024 * 1024, MAX_REQUEST_BYTES, 1024 * 1024 * 1024),
    largeBodyBytes: LARGE_BODY_BYTES,
    authenticationHeapMb: AUTHENTICATION_HEAP_MB,
  };
}

/** readOwnedFile of src/internal/owned-file.ts, its problems named after `variable`. */
export function readOwnedFile(variable: string, path: string, maxBytes: number, kind: 'secret' | 'public'): string {
  return readOwnedFileOf(path, maxBytes, kind, (problem) => new HostSettingError(variable, problem));
}
