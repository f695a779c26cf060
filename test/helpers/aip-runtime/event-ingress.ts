/**
 * The runtime's connector-event ingress (`POST /aip/v1/connector-events`, §1.7), checking each
 * `event_stream` envelope in the order of the reference's `ConnectorEventIngress::handle` and
 * `handle_event_stream`: capacity, envelope ≤ 4 MiB, `to`, signature, `from`, `security.connector_event`
 * as a `deny_unknown_fields` struct, `sent_at` in [now − 24 h, now + 5 min], the route against the
 * registry (replica, its lease and DID, instance, version digest, channel declared in the admitted
 * manifest), 1–100 events without a cursor, then each event (kind 1–256 bytes, occurred_at ≤ now + 5 min,
 * actor = sender when present, data an object, enriched ≤ 256 KiB) and the idempotent append by event id.
 * Answers as `status_for_error` maps categories (auth 401, permanent 400, temporary 503), always signed.
 * Bodies are parsed as serde_json does (the double's wire parser). Switchable to capacity back-pressure,
 * unavailable, or down.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isDeepStrictEqual } from 'node:util';
import { type Envelope, type Principal, verifyEnvelopeText } from '../../../src/host/wire/envelope.js';
import { type Json, parseWire, wireJson } from '../../../src/host/wire/json.js';
import { reserialize } from '../../../src/host/wire/reference-types.js';
import { parseRfc3339 } from '../../../src/host/wire/time.js';
import type { Party } from './deployment.js';
import { principalProblem, sentAtProblem } from './envelope-checks.js';
import { sendIngressAnswer } from './ingress-answer.js';
import { readLimitedBody, sendText, startLoopbackServer } from './http.js';

export const EVENTS_PATH = '/aip/v1/connector-events';
const ENVELOPE_LIMIT = 4 * 1024 * 1024;
const EVENT_LIMIT = 256 * 1024;
const MAX_EVENTS = 100;
const MAX_AGE_MS = 24 * 60 * 60_000;
const FUTURE_SKEW_MS = 5 * 60_000;
const ROUTE_FIELDS = {
  tenant_id: 'string',
  instance_id: 'string',
  replica_id: 'string',
  version_id: 'string',
  manifest_digest: 'string',
  lease_sequence: 'u64',
  channel_id: 'string',
} as const;

export type EventIngressMode = 'accept' | 'capacity' | 'unavailable' | 'down';

/** A replica as the registry knows it: identity, registered lease and the version it runs. */
export interface RegisteredReplica {
  readonly replicaId: string;
  readonly instanceId: string;
  readonly versionId: string;
  /** id, kind, trust_domain (and did). */
  readonly principal: Principal;
  readonly did: string;
  readonly status: 'ready' | 'draining' | 'offline';
  readonly leaseExpiresAt: number;
  /** The replica's health revision: the last lease sequence granted. */
  readonly healthRevision: number;
}

/** The admitted connector instance and version. */
export interface AdmittedVersion {
  readonly tenantId: string;
  readonly instanceId: string;
  readonly versionId: string;
  readonly manifestDigest: string;
  readonly channels: readonly unknown[];
}

export interface EventRecord {
  status: number;
  code?: string;
  problem?: string;
  /** Event ids of the envelope. */
  eventIds: string[];
  /** The request body as received ('' when the connection was dropped). */
  text: string;
}

export interface EventIngress {
  readonly url: string;
  mode: EventIngressMode;
  readonly records: EventRecord[];
  /** Stored (enriched) events by id, in first-append order. */
  readonly stored: Map<string, Record<string, Json>>;
  close(): Promise<void>;
}

export interface EventIngressOptions {
  readonly central: Party;
  readonly replica: (replicaId: string) => RegisteredReplica | undefined;
  readonly version: () => AdmittedVersion | undefined;
  readonly now?: () => number;
}

type Refusal = { status: number; code: string; category: string; retryable: boolean; message: string; retry_after_ms?: number };

const denied = (message: string): Refusal => ({ status: 401, code: 'connector_event.not_authorized', category: 'auth', retryable: false, message });
const invalid = (message: string): Refusal => ({ status: 400, code: 'connector_event.invalid', category: 'permanent', retryable: false, message });
const conflict = (): Refusal => ({
  status: 400,
  code: 'connector_event.idempotency_conflict',
  category: 'permanent',
  retryable: false,
  message: 'connector event id already identifies different retained content',
});
const temporary = (code: string, retryAfterMs: number): Refusal => ({
  status: 503,
  code,
  category: 'temporary',
  retryable: true,
  message: code,
  retry_after_ms: retryAfterMs,
});

const isObject = (value: unknown): value is Record<string, Json> => value !== null && typeof value === 'object' && !Array.isArray(value);

export async function startEventIngress(options: EventIngressOptions): Promise<EventIngress> {
  const now = options.now ?? Date.now;
  const records: EventRecord[] = [];
  const stored = new Map<string, Record<string, Json>>();
  const state = { mode: 'accept' as EventIngressMode };

  const answer = (response: ServerResponse, request: Envelope | undefined, status: number, body: Record<string, unknown>) =>
    sendIngressAnswer(response, options.central, now(), request, status, body);

  /** `handle` and `handle_event_stream`: the enriched events to append, or the first refusal. */
  const check = (text: string, value: Record<string, Json>): Refusal | Record<string, Json>[] => {
    if (state.mode === 'capacity') return temporary('connector_event.capacity', 100);
    const typed = reserialize.envelope(value);
    if (!typed.ok) return invalid(`envelope does not decode: ${typed.reason}`);
    if (Buffer.byteLength(wireJson(typed.tree)) > ENVELOPE_LIMIT) return invalid('connector ingress envelope exceeds its byte limit');
    const envelope = typed.value as unknown as Envelope;
    const toProblem = principalProblem('to', envelope.to, options.central.principal, ['id', 'kind']);
    if (toProblem) return denied(toProblem);
    const signerDid = String((envelope.security as Record<string, unknown> | undefined)?.['did']);
    const parsed = parseWire(text);
    if ('error' in parsed || !verifyEnvelopeText(parsed, signerDid)) return denied('signature does not verify');
    if (!envelope.from) return denied('connector ingress sender is missing');
    const stream = (envelope.body as Record<string, unknown>)['event_stream'] as { events?: Record<string, Json>[]; next_cursor?: unknown } | undefined;
    if (!stream) return invalid('connector ingress accepts only event streams here');
    const route = (envelope.security as Record<string, unknown> | undefined)?.['connector_event'];
    const routeProblem = routeShapeProblem(route);
    if (routeProblem) return denied(`invalid event route: ${routeProblem}`);
    const sentAt = sentAtProblem(envelope.sent_at, now(), MAX_AGE_MS, FUTURE_SKEW_MS);
    if (sentAt) return invalid(sentAt);
    const authorization = authorizationProblem(route as Record<string, Json>, envelope.from, signerDid);
    if (authorization) return denied(authorization);
    const events = stream.events ?? [];
    if (stream.next_cursor !== undefined || events.length === 0 || events.length > MAX_EVENTS) {
      return invalid('connector event stream must contain a bounded non-empty event batch without a cursor');
    }
    const enriched: Record<string, Json>[] = [];
    for (const event of events) {
      const outcome = enrich(structuredClone(event), route as Record<string, Json>, envelope.from);
      if ('status' in outcome) return outcome as Refusal;
      enriched.push(outcome);
    }
    return enriched;
  };

  const authorizationProblem = (route: Record<string, Json>, sender: Principal, signerDid: string): string | undefined => {
    const replica = options.replica(String(route['replica_id']));
    const version = options.version();
    if (!replica) return 'connector event replica is not registered';
    const leaseSequence = Number(route['lease_sequence']);
    if (
      replica.instanceId !== route['instance_id'] ||
      replica.versionId !== route['version_id'] ||
      replica.status === 'offline' ||
      replica.leaseExpiresAt <= now() ||
      leaseSequence === 0 ||
      leaseSequence > replica.healthRevision ||
      replica.principal.id !== sender.id ||
      replica.principal.kind !== sender.kind ||
      replica.did !== signerDid ||
      sender.trust_domain !== replica.principal.trust_domain
    ) {
      return 'connector event sender, replica identity, or active lease does not match the registry';
    }
    if (!version || version.instanceId !== route['instance_id'] || version.tenantId !== route['tenant_id'] || version.versionId !== route['version_id']) {
      return 'connector event tenant or instance is not enabled for this version';
    }
    if (version.manifestDigest !== route['manifest_digest'] || !declaresChannel(version.channels, String(route['channel_id']))) {
      return 'connector event version, manifest digest, or channel contract is not active';
    }
    return undefined;
  };

  /** `validate_and_enrich_event`. */
  const enrich = (event: Record<string, Json>, route: Record<string, Json>, sender: Principal): Refusal | Record<string, Json> => {
    const kind = event['kind'];
    if (typeof kind !== 'string' || kind.trim() === '' || Buffer.byteLength(kind) > 256) return invalid('connector event kind must contain 1 to 256 bytes');
    const occurred = parseRfc3339(String(event['occurred_at']));
    if (occurred === undefined || occurred > now() + FUTURE_SKEW_MS) return invalid('connector event occurrence timestamp exceeds the accepted future skew');
    if (event['actor'] !== undefined && !isDeepStrictEqual(event['actor'], sender)) return denied('connector event actor does not match its signed sender');
    event['actor'] = sender as unknown as Json;
    const data = event['data'] ?? {};
    if (!isObject(data)) return invalid('connector event data must be a JSON object');
    const identity = data['identity'] ?? {};
    if (!isObject(identity)) return invalid('connector event identity must be a JSON object');
    const tenant = identity['tenant'] ?? {};
    if (!isObject(tenant)) return invalid('connector event tenant identity must be a JSON object');
    if (typeof tenant['id'] === 'string' && tenant['id'] !== route['tenant_id'])
      return denied('connector event payload tenant conflicts with its verified instance');
    const provenance = {
      instance_id: route['instance_id'],
      replica_id: route['replica_id'],
      version_id: route['version_id'],
      channel_id: route['channel_id'],
      lease_sequence: route['lease_sequence'],
    } as Record<string, Json>;
    if (data['aip_connector'] !== undefined && !isDeepStrictEqual(data['aip_connector'], provenance))
      return denied('connector event provenance conflicts with its verified route');
    event['data'] = { ...data, identity: { ...identity, tenant: { ...tenant, id: route['tenant_id'] as Json } }, aip_connector: provenance };
    if (Buffer.byteLength(wireJson(event)) > EVENT_LIMIT) return invalid('connector event exceeds its byte limit');
    return event;
  };

  /** The event log's append: a new id is stored; a known one must be the same event but for delivery provenance. */
  const append = (events: Record<string, Json>[]): Refusal | Record<string, Json>[] => {
    const accepted: Record<string, Json>[] = [];
    for (const event of events) {
      const retained = stored.get(String(event['id']));
      if (retained && !isDeepStrictEqual(replayView(retained), replayView(event))) return conflict();
      if (!retained) stored.set(String(event['id']), event);
      accepted.push(retained ?? event);
    }
    return accepted;
  };

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    if (request.method !== 'POST' || request.url !== EVENTS_PATH) return sendText(response, 404, '');
    const body = await readLimitedBody(request, ENVELOPE_LIMIT);
    if (!body.ok) return sendText(response, 413, 'length limit exceeded');
    const parsed = parseWire(body.text);
    if ('error' in parsed || !isObject(parsed.value)) return sendText(response, 400, 'Failed to parse the request body as JSON');
    const envelope = parsed.value as unknown as Envelope;
    const record: EventRecord = { status: 200, eventIds: eventIdsOf(parsed.value), text: body.text };
    records.push(record);
    const checked = state.mode === 'unavailable' ? temporary('connector_event.unavailable', 1000) : check(body.text, parsed.value);
    const appended = Array.isArray(checked) ? append(checked) : checked;
    if (Array.isArray(appended)) return answer(response, envelope, 200, { event_stream: { events: appended } });
    const { status, ...error } = appended;
    Object.assign(record, { status, code: error.code, problem: error.message });
    answer(response, envelope, status, { error: { error } });
  };

  const server = await startLoopbackServer(handle, () => records.push({ status: 0, eventIds: [], text: '' }));
  return {
    url: `${server.url}${EVENTS_PATH}`,
    get mode() {
      return state.mode;
    },
    set mode(mode: EventIngressMode) {
      state.mode = mode;
      server.down = mode === 'down';
    },
    records,
    stored,
    close: () => server.close(),
  };
}

/** `ConnectorEventRoute` decoded with `deny_unknown_fields`: each field present with its type, nothing else. */
function routeShapeProblem(route: unknown): string | undefined {
  if (!isObject(route)) return 'security.connector_event is missing or not an object';
  const unknown = Object.keys(route).filter((key) => !(key in ROUTE_FIELDS));
  if (unknown.length > 0) return `unknown field(s) ${unknown.join(', ')}`;
  for (const [key, type] of Object.entries(ROUTE_FIELDS)) {
    const value = route[key];
    const fits = type === 'string' ? typeof value === 'string' : Number.isSafeInteger(value) && (value as number) >= 0;
    if (!fits) return `field ${key} is missing or not a ${type}`;
  }
  return undefined;
}

/** `manifest_declares_channel`: a string, or an object whose `id` (else `channel_id`) is the channel. */
function declaresChannel(channels: readonly unknown[], channelId: string): boolean {
  return channels.some((channel) =>
    typeof channel === 'string' ? channel === channelId : isObject(channel) && (channel['id'] ?? channel['channel_id']) === channelId,
  );
}

/** `connector_event_replay_view`: the event without its actor and the per-delivery provenance (replica, version, lease). */
function replayView(event: Record<string, Json>): Record<string, Json> {
  const { actor: _actor, ...rest } = event;
  const data = rest['data'] as Record<string, Json>;
  const { replica_id: _r, version_id: _v, lease_sequence: _l, ...provenance } = data['aip_connector'] as Record<string, Json>;
  return { ...rest, data: { ...data, aip_connector: provenance } };
}

function eventIdsOf(value: Record<string, Json>): string[] {
  const body = value['body'];
  const events = isObject(body) && isObject(body['event_stream']) ? body['event_stream']['events'] : undefined;
  return Array.isArray(events) ? events.map((event) => String(isObject(event) ? event['id'] : '')) : [];
}
