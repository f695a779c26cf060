import { createHash } from 'node:crypto';
import type { Dispatcher } from 'undici';
import type { Logger } from 'pino';
import { LEDGER_METHODS, type RunLedger } from './ledger/types.js';
import type { TelemetryOptions } from './telemetry.js';
import { Secret } from './internal/secret.js';
import { isLoopbackHost } from './internal/loopback.js';
import { readOwnedFile } from './internal/owned-file.js';
import { OPERATION_NAMES, OPTIONAL_OPERATIONS, type HermesConnectorOptions, type OperationName, type WebhookEvents } from './types.js';
import { journalStoreOf, type ResolvedJournalOptions } from './journal/types.js';
import { deliveryStoreOf, type DeliveryTarget, type ResolvedDeliveryOptions } from './outbox/types.js';

export type ConfigErrorCode =
  | 'invalid_options'
  | 'unknown_option'
  | 'no_endpoints'
  | 'invalid_endpoint'
  | 'invalid_endpoint_id'
  | 'duplicate_endpoint_id'
  | 'invalid_base_url'
  | 'invalid_api_key'
  | 'invalid_display_name'
  | 'invalid_tenant_id'
  | 'invalid_operations'
  | 'invalid_limits'
  | 'invalid_logger'
  | 'invalid_dispatcher'
  | 'invalid_clock'
  | 'invalid_ledger'
  | 'insecure_ledger_file'
  | 'invalid_journal'
  | 'invalid_webhooks'
  | 'invalid_delivery'
  | 'ledger_unavailable';

const CONFIG_ERROR_BRAND = Symbol.for('aip-connector-hermes-agent.ConnectorConfigError');

/** Thrown by createHermesConnector for bad configuration; `code` is stable, the message never holds a secret. */
export class ConnectorConfigError extends Error {
  readonly code: ConfigErrorCode;

  constructor(code: ConfigErrorCode, message: string) {
    super(message);
    this.name = 'ConnectorConfigError';
    this.code = code;
    Object.defineProperty(this, CONFIG_ERROR_BRAND, { value: true });
  }

  /** instanceof that also holds across two loaded copies of the package. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[CONFIG_ERROR_BRAND] === true;
  }
}

export interface ResolvedEndpoint {
  readonly id: string;
  readonly origin: string;
  /** The origin's host and port, as traces name them (`server.address`, `server.port`). */
  readonly server: { readonly address: string; readonly port: number };
  readonly displayName: string | undefined;
  readonly tenantId: string | undefined;
  /** The operations published for this endpoint, in OPERATION_NAMES order: the five, plus the optional ones it opted into. */
  readonly operations: readonly OperationName[];
  readonly apiKey: Secret | undefined;
  /** A short hash of the key (never the key): which credential was in force, for evidence. */
  readonly credentialRevision: string | undefined;
}

export interface ResolvedLimits {
  readonly maxJsonResponseBytes: number;
  readonly maxStreamResponseBytes: number;
  readonly maxSseFrameBytes: number;
  readonly defaultMaxEvents: number;
  readonly maxRequestBodyBytes: number;
  readonly sseIdleTimeoutMs: number;
}

export interface ResolvedConfig {
  readonly endpoints: readonly ResolvedEndpoint[];
  readonly limits: ResolvedLimits;
  readonly logger: Logger | undefined;
  readonly dispatcher: Dispatcher | undefined;
  readonly now: () => number;
  readonly ledger: RunLedger | undefined;
  readonly idempotencyLeaseMs: number;
  readonly telemetry: TelemetryOptions;
  /** The run event journal, when on (it needs a durable ledger). */
  readonly journal: ResolvedJournalOptions | undefined;
  /** The outbox of run events, when there are targets (it needs the journal). */
  readonly delivery: ResolvedDelivery | undefined;
  /** The Standard Webhooks targets (they need the journal). */
  readonly webhooks: readonly ResolvedWebhook[];
}

export interface ResolvedWebhook {
  /** `webhook:` and 16 hex digits of the SHA-256 of the URL's origin and path: stable, never the URL (its path or query may hold a token). */
  readonly id: string;
  /** The whole URL, held as a secret since its path or query may carry a token. */
  readonly url: Secret;
  /** The URL's origin: what log lines and outcome reasons name. */
  readonly origin: string;
  /** The signing secret as the secret file holds it (`whsec_…`). */
  readonly secret: Secret;
  readonly events: WebhookEvents;
  readonly timeoutMs: number;
}

export interface ResolvedDelivery {
  /** The `eventTargets` given. */
  readonly targets: readonly DeliveryTarget[];
  /** The webhooks, whose targets the connector makes (they hold its HTTP pools). */
  readonly webhooks: readonly ResolvedWebhook[];
  readonly options: ResolvedDeliveryOptions;
}

const MiB = 1024 * 1024;
export const DEFAULT_LIMITS: ResolvedLimits = Object.freeze({
  maxJsonResponseBytes: 16 * MiB,
  maxStreamResponseBytes: 64 * MiB,
  maxSseFrameBytes: 1 * MiB,
  defaultMaxEvents: 4096,
  maxRequestBodyBytes: 16 * MiB,
  sseIdleTimeoutMs: 90_000,
});
export const MAX_EVENTS_CEILING = 100_000;
const MAX_LIMIT_BYTES = 256 * MiB;

const TOP_LEVEL_OPTIONS = new Set([
  'endpoints',
  'logger',
  'dispatcher',
  'limits',
  'now',
  'ledger',
  'idempotencyLeaseMs',
  'tracerProvider',
  'meterProvider',
  'propagateTraceContext',
  'journal',
  'webhooks',
  'eventTargets',
  'delivery',
]);
export const DEFAULT_IDEMPOTENCY_LEASE_MS = 30_000;
const ENDPOINT_FIELDS = new Set(['id', 'baseUrl', 'apiKey', 'displayName', 'tenantId', 'operations']);
const ENDPOINT_ID = /^[a-z0-9_-]{1,128}$/;
const API_KEY = /^[\x21-\x7e]{1,16384}$/;
// eslint-disable-next-line no-control-regex
const CONTROL = /\p{Cc}/u;

/** Validates every option before any I/O. Throws ConnectorConfigError; never fixes a value silently. */
export function resolveConfig(options: HermesConnectorOptions): ResolvedConfig {
  if (!isPlainObject(options)) throw new ConnectorConfigError('invalid_options', 'options must be an object');
  for (const key of Object.keys(options)) {
    if (!TOP_LEVEL_OPTIONS.has(key)) throw new ConnectorConfigError('unknown_option', `unknown option \`${safeName(key)}\``);
  }
  const webhooks = resolveWebhooks(options.webhooks, options.journal);
  return {
    endpoints: resolveEndpoints(options.endpoints),
    limits: resolveLimits(options.limits),
    logger: resolveLogger(options.logger),
    dispatcher: resolveDispatcher(options.dispatcher),
    now: resolveClock(options.now),
    ledger: resolveLedger(options.ledger),
    idempotencyLeaseMs: resolveLeaseMs(options.idempotencyLeaseMs),
    telemetry: resolveTelemetry(options),
    journal: resolveJournal(options.journal, options.ledger),
    webhooks,
    delivery: resolveDelivery(options, webhooks),
  };
}

export const DEFAULT_WEBHOOK_TIMEOUT_MS = 15_000;
const WEBHOOK_FIELDS = new Set(['url', 'secretFile', 'events', 'allowLoopbackHttp', 'timeoutMs']);
const WEBHOOK_EVENTS: readonly WebhookEvents[] = ['all', 'lifecycle'];
const MAX_WEBHOOK_URL_BYTES = 2048;
const MAX_WEBHOOK_SECRET_FILE_BYTES = 1024;
/** `whsec_` and base64 (standard alphabet, padded), the Standard Webhooks symmetric secret's form; it must hold 24 to 64 bytes. */
const WEBHOOK_SECRET = /^whsec_((?:[A-Za-z0-9+/]{4})+(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?)$/;
const WEBHOOK_SECRET_BYTES = [24, 64] as const;

/** `webhooks`: absent or empty is none; each one is checked, its secret file read, before any I/O. */
function resolveWebhooks(webhooks: unknown, journal: unknown): readonly ResolvedWebhook[] {
  if (webhooks === undefined) return [];
  if (!Array.isArray(webhooks)) throw new ConnectorConfigError('invalid_webhooks', 'options.webhooks must be an array');
  if (webhooks.length > 0 && journal === undefined) {
    throw new ConnectorConfigError(
      'invalid_webhooks',
      'options.webhooks needs the run event journal (options.journal, with createSqliteLedger or createPostgresLedger): webhooks deliver the journaled events',
    );
  }
  const resolved = webhooks.map(resolveWebhook);
  const ids = new Set<string>();
  resolved.forEach((webhook, index) => {
    if (ids.has(webhook.id)) throw new ConnectorConfigError('invalid_webhooks', `webhooks[${index}] has the origin and path of an earlier webhook`);
    ids.add(webhook.id);
  });
  return Object.freeze(resolved);
}

function resolveWebhook(webhook: unknown, index: number): ResolvedWebhook {
  const where = `webhooks[${index}]`;
  const invalid = (why: string) => new ConnectorConfigError('invalid_webhooks', `${where} ${why}`);
  if (!isPlainObject(webhook)) throw invalid('must be an object');
  for (const key of Object.keys(webhook)) {
    if (!WEBHOOK_FIELDS.has(key)) throw new ConnectorConfigError('unknown_option', `${where} has unknown field \`${safeName(key)}\``);
  }
  const { url, secretFile, events = 'all', allowLoopbackHttp = false, timeoutMs = DEFAULT_WEBHOOK_TIMEOUT_MS } = webhook;
  if (typeof allowLoopbackHttp !== 'boolean') throw invalid('allowLoopbackHttp must be true or false');
  const target = webhookUrl(url, allowLoopbackHttp, invalid);
  if (!WEBHOOK_EVENTS.includes(events as WebhookEvents)) throw invalid('events must be "all" or "lifecycle"');
  if (typeof timeoutMs !== 'number' || !Number.isInteger(timeoutMs) || timeoutMs < 100 || timeoutMs > 120_000) {
    throw invalid('timeoutMs must be an integer from 100 to 120000');
  }
  return Object.freeze({
    id: `webhook:${createHash('sha256').update(`${target.origin}${target.pathname}`).digest('hex').slice(0, 16)}`,
    url: new Secret(target.href),
    origin: target.origin,
    secret: webhookSecret(secretFile, invalid),
    events: events as WebhookEvents,
    timeoutMs,
  });
}

/** The URL, never echoed (its path or query may hold a token): https, or http to loopback when allowed. */
function webhookUrl(url: unknown, allowLoopbackHttp: boolean, invalid: (why: string) => ConnectorConfigError): URL {
  if (typeof url !== 'string' || Buffer.byteLength(url) > MAX_WEBHOOK_URL_BYTES)
    throw invalid(`url must be a string of at most ${MAX_WEBHOOK_URL_BYTES} bytes`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid('url is not a valid URL');
  }
  if (parsed.username !== '' || parsed.password !== '') throw invalid('url must not contain user info');
  if (url.includes('#')) throw invalid('url must not contain a fragment');
  if (parsed.protocol === 'https:') return parsed;
  if (parsed.protocol !== 'http:') throw invalid('url must use https');
  if (!isLoopbackHost(parsed.hostname)) throw invalid('url must use https (plain http only to a loopback host, with allowLoopbackHttp)');
  if (!allowLoopbackHttp) throw invalid('url uses plain http to a loopback host: set allowLoopbackHttp to allow it');
  return parsed;
}

/** The secret file's Standard Webhooks secret; neither the file's content nor its path is echoed. */
function webhookSecret(secretFile: unknown, invalid: (why: string) => ConnectorConfigError): Secret {
  if (typeof secretFile !== 'string' || secretFile === '' || CONTROL.test(secretFile)) throw invalid('secretFile must be a file path');
  const text = readOwnedFile(secretFile, MAX_WEBHOOK_SECRET_FILE_BYTES, 'secret', (problem) => invalid(`secretFile: ${problem}`)).trim();
  const base64 = WEBHOOK_SECRET.exec(text)?.[1];
  const bytes = base64 === undefined ? 0 : Buffer.from(base64, 'base64').length;
  if (bytes < WEBHOOK_SECRET_BYTES[0] || bytes > WEBHOOK_SECRET_BYTES[1]) {
    throw invalid('secretFile must hold a Standard Webhooks secret: whsec_ and the base64 of 24 to 64 random bytes');
  }
  return new Secret(text);
}

export const DEFAULT_JOURNAL: ResolvedJournalOptions = Object.freeze({
  followersPerEndpoint: 64,
  maxEventsPerRun: MAX_EVENTS_CEILING,
  maxBytesPerRun: 16 * MiB,
  maxTotalBytes: 1024 * MiB,
  retentionMs: 24 * 60 * 60 * 1000,
  // The run_events contract's AIP timeout: a follower reads no longer than one run_events call may.
  followLimitMs: 300_000,
  leaseMs: 15_000,
});

const JOURNAL_BOUNDS: Record<keyof ResolvedJournalOptions, readonly [number, number]> = {
  followersPerEndpoint: [1, 10_000],
  maxEventsPerRun: [1, MAX_EVENTS_CEILING],
  maxBytesPerRun: [1024, MAX_LIMIT_BYTES],
  maxTotalBytes: [1024, Number.MAX_SAFE_INTEGER],
  retentionMs: [1000, 365 * 24 * 60 * 60 * 1000],
  followLimitMs: [1000, DEFAULT_JOURNAL.followLimitMs],
  leaseMs: [100, 3_600_000],
};

/** `journal`: absent is off; an object (every field optional) is on, and needs a ledger that keeps journals. */
function resolveJournal(journal: unknown, ledger: unknown): ResolvedJournalOptions | undefined {
  if (journal === undefined) return undefined;
  const resolved = resolveIntegers(journal, DEFAULT_JOURNAL, JOURNAL_BOUNDS, 'journal', 'invalid_journal');
  if (journalStoreOf(ledger) === undefined) {
    throw new ConnectorConfigError(
      'invalid_journal',
      'options.journal needs a durable ledger that keeps journals (createSqliteLedger or createPostgresLedger): the events must outlive the process',
    );
  }
  return resolved;
}

/** An options object of integer fields, each optional, within its bounds; the defaults fill the rest. */
function resolveIntegers<T extends object>(
  given: unknown,
  defaults: T,
  bounds: Record<keyof T, readonly [number, number]>,
  field: string,
  code: ConfigErrorCode,
): T {
  if (!isPlainObject(given)) throw new ConnectorConfigError(code, `options.${field} must be an object`);
  const resolved: Record<string, number> = { ...(defaults as Record<string, number>) };
  for (const [key, value] of Object.entries(given)) {
    const range = bounds[key as keyof T] as readonly [number, number] | undefined;
    if (!Object.hasOwn(bounds, key) || range === undefined)
      throw new ConnectorConfigError('unknown_option', `options.${field} has unknown field \`${safeName(key)}\``);
    if (value === undefined) continue;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < range[0] || value > range[1]) {
      throw new ConnectorConfigError(code, `${field}.${key} must be an integer from ${range[0]} to ${range[1]}`);
    }
    resolved[key] = value;
  }
  return Object.freeze(resolved) as T;
}

export const DEFAULT_DELIVERY: ResolvedDeliveryOptions = Object.freeze({
  maxAgeMs: 24 * 60 * 60 * 1000,
  // The AIP connector host's outbox holds at most 10,000 pending batches.
  maxPendingPerTarget: 10_000,
  concurrencyPerTarget: 16,
  attemptTimeoutMs: 30_000,
  leaseMs: 15_000,
});

const DELIVERY_BOUNDS: Record<keyof ResolvedDeliveryOptions, readonly [number, number]> = {
  maxAgeMs: [1000, 30 * 24 * 60 * 60 * 1000],
  maxPendingPerTarget: [1, 1_000_000],
  concurrencyPerTarget: [1, 1000],
  attemptTimeoutMs: [100, 300_000],
  leaseMs: [100, 3_600_000],
};
const TARGET_ID = /^[\x21-\x7e]{1,128}$/;
const MAX_TARGET_BATCH = 1000;

/**
 * The outbox: on when there are delivery targets (`eventTargets`, and a target per webhook, which the
 * connector makes), which need the journal (the outbox delivers its events). `delivery` alone only sets
 * the outbox's options.
 */
function resolveDelivery(options: HermesConnectorOptions, webhooks: readonly ResolvedWebhook[]): ResolvedDelivery | undefined {
  const resolved =
    options.delivery === undefined ? DEFAULT_DELIVERY : resolveIntegers(options.delivery, DEFAULT_DELIVERY, DELIVERY_BOUNDS, 'delivery', 'invalid_delivery');
  const targets = resolveEventTargets(options.eventTargets);
  if (targets.length === 0 && webhooks.length === 0) return undefined;
  const seen = new Set<string>();
  for (const { id } of [...webhooks, ...targets]) {
    if (seen.has(id)) throw new ConnectorConfigError('invalid_delivery', `delivery target id \`${safeName(id)}\` is configured twice`);
    seen.add(id);
  }
  if (options.journal === undefined || deliveryStoreOf(options.ledger) === undefined) {
    throw new ConnectorConfigError(
      'invalid_delivery',
      "delivery targets need the run event journal (options.journal) on a ledger with an outbox (createSqliteLedger or createPostgresLedger): the outbox delivers the journal's events",
    );
  }
  return Object.freeze({ targets: Object.freeze(targets), webhooks, options: resolved });
}

function resolveEventTargets(targets: unknown): DeliveryTarget[] {
  if (targets === undefined) return [];
  if (!Array.isArray(targets)) throw new ConnectorConfigError('invalid_delivery', 'options.eventTargets must be an array of delivery targets');
  return targets.map((target: unknown, index) => {
    const where = `eventTargets[${index}]`;
    if (!isPlainObjectLike(target)) throw new ConnectorConfigError('invalid_delivery', `${where} must be a delivery target`);
    const { id, maxBatch, accepts, deliver } = target as Record<string, unknown>;
    if (typeof id !== 'string' || !TARGET_ID.test(id)) throw new ConnectorConfigError('invalid_delivery', `${where}.id must be 1-128 visible ASCII characters`);
    if (typeof maxBatch !== 'number' || !Number.isInteger(maxBatch) || maxBatch < 1 || maxBatch > MAX_TARGET_BATCH) {
      throw new ConnectorConfigError('invalid_delivery', `${where}.maxBatch must be an integer from 1 to ${MAX_TARGET_BATCH}`);
    }
    if (typeof accepts !== 'function' || typeof deliver !== 'function') {
      throw new ConnectorConfigError('invalid_delivery', `${where} must have accepts(event) and deliver(events, signal) methods`);
    }
    return target as DeliveryTarget;
  });
}

/** The OpenTelemetry providers, checked for the one method each that the connector calls. */
export function resolveTelemetry(options: Pick<HermesConnectorOptions, 'tracerProvider' | 'meterProvider' | 'propagateTraceContext'>): TelemetryOptions {
  const { tracerProvider, meterProvider, propagateTraceContext } = options;
  if (tracerProvider !== undefined && typeof (tracerProvider as { getTracer?: unknown } | null)?.getTracer !== 'function') {
    throw new ConnectorConfigError('invalid_options', 'options.tracerProvider must be an OpenTelemetry TracerProvider');
  }
  if (meterProvider !== undefined && typeof (meterProvider as { getMeter?: unknown } | null)?.getMeter !== 'function') {
    throw new ConnectorConfigError('invalid_options', 'options.meterProvider must be an OpenTelemetry MeterProvider');
  }
  if (propagateTraceContext !== undefined && typeof propagateTraceContext !== 'boolean') {
    throw new ConnectorConfigError('invalid_options', 'options.propagateTraceContext must be a boolean');
  }
  return { tracerProvider, meterProvider, propagateTraceContext };
}

/** Whether a value has every RunLedger method (any object with them may serve as a ledger). */
export function isRunLedger(ledger: unknown): ledger is RunLedger {
  return isPlainObjectLike(ledger) && LEDGER_METHODS.every((method) => typeof (ledger as Record<string, unknown>)[method] === 'function');
}

function resolveLedger(ledger: unknown): RunLedger | undefined {
  if (ledger === undefined) return undefined;
  if (!isRunLedger(ledger)) {
    throw new ConnectorConfigError('invalid_ledger', 'options.ledger must be a RunLedger (createMemoryLedger, createSqliteLedger, createPostgresLedger)');
  }
  return ledger;
}

function resolveLeaseMs(leaseMs: unknown): number {
  if (leaseMs === undefined) return DEFAULT_IDEMPOTENCY_LEASE_MS;
  if (typeof leaseMs !== 'number' || !Number.isInteger(leaseMs) || leaseMs < 100 || leaseMs > 3_600_000) {
    throw new ConnectorConfigError('invalid_options', 'options.idempotencyLeaseMs must be an integer from 100 to 3600000');
  }
  return leaseMs;
}

function resolveEndpoints(endpoints: unknown): ResolvedEndpoint[] {
  if (!Array.isArray(endpoints) || endpoints.length === 0) {
    throw new ConnectorConfigError('no_endpoints', 'options.endpoints must be a non-empty array');
  }
  const seen = new Set<string>();
  return endpoints.map((endpoint: unknown, index) => {
    const resolved = resolveEndpoint(endpoint, index);
    if (seen.has(resolved.id)) throw new ConnectorConfigError('duplicate_endpoint_id', `endpoint id \`${resolved.id}\` is configured twice`);
    seen.add(resolved.id);
    return resolved;
  });
}

function resolveEndpoint(endpoint: unknown, index: number): ResolvedEndpoint {
  const where = `endpoints[${index}]`;
  if (!isPlainObject(endpoint)) throw new ConnectorConfigError('invalid_endpoint', `${where} must be an object`);
  for (const key of Object.keys(endpoint)) {
    if (!ENDPOINT_FIELDS.has(key)) throw new ConnectorConfigError('unknown_option', `${where} has unknown field \`${safeName(key)}\``);
  }
  const { id, baseUrl, apiKey, displayName, tenantId, operations } = endpoint as Record<string, unknown>;
  if (typeof id !== 'string' || !ENDPOINT_ID.test(id)) {
    throw new ConnectorConfigError('invalid_endpoint_id', `${where}.id must be 1-128 characters of [a-z0-9_-] (it is not normalized for you)`);
  }
  const named = `endpoint \`${id}\``;
  const key = resolveApiKey(apiKey, named);
  const origin = resolveOrigin(baseUrl, named);
  return Object.freeze({
    id,
    origin,
    server: serverOf(origin),
    apiKey: key,
    credentialRevision: key && credentialRevision(key.reveal()),
    displayName: optionalText(displayName, 256, 'invalid_display_name', `${named} displayName`),
    tenantId: optionalText(tenantId, 512, 'invalid_tenant_id', `${named} tenantId`),
    operations: publishedOperations(operations, named),
  });
}

/** The five operations every endpoint has, plus each optional one set to true in `operations`. */
function publishedOperations(operations: unknown, named: string): readonly OperationName[] {
  const optional: readonly string[] = OPTIONAL_OPERATIONS;
  const chosen = operations ?? {};
  if (!isPlainObject(chosen)) throw new ConnectorConfigError('invalid_operations', `${named} operations must be an object such as { "run_steer": true }`);
  for (const [name, value] of Object.entries(chosen)) {
    if (!optional.includes(name)) throw new ConnectorConfigError('invalid_operations', `${named} operations has unknown field \`${safeName(name)}\``);
    if (typeof value !== 'boolean') throw new ConnectorConfigError('invalid_operations', `${named} operations.${name} must be true or false`);
  }
  return Object.freeze(OPERATION_NAMES.filter((name) => !optional.includes(name) || chosen[name] === true));
}

function resolveOrigin(baseUrl: unknown, named: string): string {
  // The URL itself is never echoed: it may carry credentials in its user info.
  const invalid = (why: string) => new ConnectorConfigError('invalid_base_url', `${named} baseUrl ${why}`);
  if (typeof baseUrl !== 'string') throw invalid('must be a string');
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw invalid('is not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalid('must use http or https');
  if (url.username !== '' || url.password !== '') throw invalid('must not contain user info');
  if (baseUrl.includes('?') || baseUrl.includes('#')) throw invalid('must not contain a query or fragment');
  if (url.pathname !== '/') throw invalid('must be an origin (no path other than /)');
  return url.origin;
}

function serverOf(origin: string): { address: string; port: number } {
  const url = new URL(origin);
  return Object.freeze({ address: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(url.port) || (url.protocol === 'https:' ? 443 : 80) });
}

function resolveApiKey(apiKey: unknown, named: string): Secret | undefined {
  if (apiKey === undefined) return undefined;
  if (typeof apiKey !== 'string' || !API_KEY.test(apiKey)) {
    throw new ConnectorConfigError('invalid_api_key', `${named} apiKey must be 1-16384 visible ASCII characters (no whitespace or control characters)`);
  }
  return new Secret(apiKey);
}

/** The first 12 hex digits of the key's SHA-256: enough to tell revisions apart, useless to an attacker. */
export function credentialRevision(apiKey: string): string {
  return createHash('sha256').update(apiKey).digest('hex').slice(0, 12);
}

function optionalText(value: unknown, maxBytes: number, code: ConfigErrorCode, what: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.trim() === '' || value.trim() !== value || CONTROL.test(value) || Buffer.byteLength(value) > maxBytes) {
    throw new ConnectorConfigError(code, `${what} must be non-blank, unpadded, at most ${maxBytes} bytes, without control characters`);
  }
  return value;
}

function resolveLimits(limits: unknown): ResolvedLimits {
  if (limits === undefined) return DEFAULT_LIMITS;
  if (!isPlainObject(limits)) throw new ConnectorConfigError('invalid_limits', 'options.limits must be an object');
  const merged: Record<string, unknown> = { ...DEFAULT_LIMITS };
  for (const [key, value] of Object.entries(limits)) {
    if (!Object.hasOwn(DEFAULT_LIMITS, key)) throw new ConnectorConfigError('unknown_option', `options.limits has unknown field \`${safeName(key)}\``);
    if (value !== undefined) merged[key] = value;
  }
  const resolved = merged as unknown as ResolvedLimits;
  for (const key of ['maxJsonResponseBytes', 'maxStreamResponseBytes', 'maxSseFrameBytes', 'maxRequestBodyBytes'] as const) {
    requireInteger(resolved[key], 1, MAX_LIMIT_BYTES, key);
  }
  requireInteger(resolved.defaultMaxEvents, 1, MAX_EVENTS_CEILING, 'defaultMaxEvents');
  requireInteger(resolved.sseIdleTimeoutMs, 1, 3_600_000, 'sseIdleTimeoutMs');
  if (resolved.maxSseFrameBytes > resolved.maxStreamResponseBytes) {
    throw new ConnectorConfigError('invalid_limits', 'limits.maxSseFrameBytes must not exceed limits.maxStreamResponseBytes');
  }
  return Object.freeze(resolved);
}

function requireInteger(value: unknown, min: number, max: number, name: string): void {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new ConnectorConfigError('invalid_limits', `limits.${name} must be an integer from ${min} to ${max}`);
  }
}

function resolveLogger(logger: unknown): Logger | undefined {
  if (logger === undefined) return undefined;
  if (!isPlainObjectLike(logger) || typeof (logger as Logger).child !== 'function') {
    throw new ConnectorConfigError('invalid_logger', 'options.logger must be a pino logger');
  }
  return logger as Logger;
}

function resolveDispatcher(dispatcher: unknown): Dispatcher | undefined {
  if (dispatcher === undefined) return undefined;
  if (!isPlainObjectLike(dispatcher) || typeof (dispatcher as Dispatcher).dispatch !== 'function' || typeof (dispatcher as Dispatcher).request !== 'function') {
    throw new ConnectorConfigError('invalid_dispatcher', 'options.dispatcher must be an undici Dispatcher');
  }
  return dispatcher as Dispatcher;
}

function resolveClock(now: unknown): () => number {
  if (now === undefined) return Date.now;
  if (typeof now !== 'function') throw new ConnectorConfigError('invalid_clock', 'options.now must be a function returning epoch milliseconds');
  return now as () => number;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isPlainObjectLike(value: unknown): boolean {
  return (typeof value === 'object' || typeof value === 'function') && value !== null;
}

/** Option names are echoed only when they look like identifiers. */
function safeName(key: string): string {
  return /^[A-Za-z0-9_$-]{1,64}$/.test(key) ? key : '…';
}
