/**
 * The runtime's callback ingress (`POST /aip/v1/connector-callbacks`, §1.6): every
 * `stream_chunk` a host posts is checked as `ConnectorEventIngress::handle_stream_callback`
 * does (recipient, host signature, the route as a `deny_unknown_fields` struct in streaming
 * mode, chunk action id, sent_at ±5 min, ≤ 256 KiB, the route equal to the durable
 * assignment, the sender equal to the replica; then, as the runtime's
 * `ingest_assigned_connector_stream_chunk`, a central execution of the action still waiting for
 * its POST), then answered with a signed `event_stream`
 * envelope. Switchable to slow, refusing (503 `connector_event.unavailable`) or down. Records
 * every delivery in arrival order.
 */
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Envelope, Principal } from '../../../src/host/wire/envelope.js';
import { parseWire, wireJson } from '../../../src/host/wire/json.js';
import { CALLBACK_PATH, ROUTE_KEYS, type ConnectorRoute, type Party } from './deployment.js';
import { principalProblem, roundtripProblem, sentAtProblem, signatureProblem, type ParsedWire } from './envelope-checks.js';
import { sendIngressAnswer } from './ingress-answer.js';
import { readLimitedBody, sendText, startLoopbackServer, waitUntil } from './http.js';

const ENVELOPE_LIMIT = 4 * 1024 * 1024;
const CHUNK_LIMIT = 256 * 1024;
const SENT_AT_WINDOW_MS = 5 * 60_000;
/** Route fields a serde struct requires (the `Option` ones may be absent). */
const REQUIRED_ROUTE_KEYS = ROUTE_KEYS.filter((key) => !['credential_revision_ref', 'quota_policy_ref', 'original_mode'].includes(key));

export type IngressMode = 'accept' | 'slow' | 'refuse' | 'down';

export interface StreamChunk {
  action_id: string;
  sequence: number;
  kind: string;
  data?: unknown;
  part?: unknown;
}

export interface ChunkRecord {
  arrivedAt: number;
  /** 0: dropped while down. */
  status: number;
  chunk?: StreamChunk;
  /** What the central checks found wrong; a chunk is accepted only with none (and not while refusing). */
  problems: string[];
  accepted: boolean;
}

/** A host replica as the registry knows it. */
export interface HostIdentity {
  readonly did: string;
  /** id, kind, trust_domain and did. */
  readonly principal: Principal;
  readonly replicaId: string;
}

export interface CallbackIngress {
  /** The full target (`…/aip/v1/connector-callbacks`). */
  readonly url: string;
  mode: IngressMode;
  /** The delay of `slow` mode before each answer. */
  slowMs: number;
  readonly records: ChunkRecord[];
  trustHost(host: HostIdentity): void;
  /** The durable route assignment of a streaming action (the dispatcher records it before sending). */
  assign(route: ConnectorRoute): void;
  /** A central execution of the action starts or stops waiting for its POST: chunks are accepted only in between. */
  executing(actionId: string, waiting: boolean): void;
  /** Accepted chunks of one action, in arrival order. */
  accepted(actionId: string): StreamChunk[];
  waitFor(match: (record: ChunkRecord) => boolean, what: string, timeoutMs?: number): Promise<ChunkRecord>;
  close(): Promise<void>;
}

type Refusal = { status: number; code: string; category: string; retryable: boolean; message: string };

/** Statuses by category as `status_for_error` (crates/aip-transport-http) maps them: auth 401, permanent 400, temporary 503. */
const notAuthorized = (message: string): Refusal => ({ status: 401, code: 'connector_event.not_authorized', category: 'auth', retryable: false, message });
const invalid = (message: string): Refusal => ({ status: 400, code: 'connector_event.invalid', category: 'permanent', retryable: false, message });

function routeProblems(route: unknown, assignment: ConnectorRoute | undefined): string[] {
  if (route === null || typeof route !== 'object' || Array.isArray(route)) return ['security.connector_callback is not an object'];
  const fields = route as Record<string, unknown>;
  const problems: string[] = [];
  const unknown = Object.keys(fields).filter((key) => !(ROUTE_KEYS as readonly string[]).includes(key));
  if (unknown.length > 0) problems.push(`security.connector_callback has unknown fields ${unknown.join(', ')} (deny_unknown_fields)`);
  const missing = REQUIRED_ROUTE_KEYS.filter((key) => !(key in fields));
  if (missing.length > 0) problems.push(`security.connector_callback lacks ${missing.join(', ')}`);
  if (fields['original_mode'] !== 'streaming') problems.push(`route original_mode is ${JSON.stringify(fields['original_mode'])}, not "streaming"`);
  if (!assignment) problems.push(`no durable assignment for action ${JSON.stringify(fields['action_id'])}`);
  else {
    const differing = ROUTE_KEYS.filter((key) => (fields[key] ?? null) !== (assignment[key] ?? null));
    if (differing.length > 0) problems.push(`route differs from the durable assignment in ${differing.join(', ')}`);
  }
  return problems;
}

export async function startCallbackIngress(central: Party, now: () => number = Date.now): Promise<CallbackIngress> {
  const records: ChunkRecord[] = [];
  const assignments = new Map<string, ConnectorRoute>();
  /** Central executions waiting for their POST, by action id (a count: a retry may overlap). */
  const waiting = new Map<string, number>();
  const hosts = new Map<string, HostIdentity>();
  const changes = new EventEmitter();
  const state = { mode: 'accept' as IngressMode, slowMs: 200 };
  const record = (entry: ChunkRecord) => {
    records.push(entry);
    changes.emit('record');
  };

  const answer = (response: ServerResponse, request: Envelope | undefined, status: number, body: Record<string, unknown>) =>
    sendIngressAnswer(response, central, now(), request, status, body);

  /** The central checks in the order of §1.6; the first that fails decides the refusal, all are recorded. */
  const verify = (parsed: ParsedWire, entry: ChunkRecord): Refusal | undefined => {
    const envelope = parsed.value as unknown as Envelope;
    const security = (envelope.security ?? {}) as Record<string, unknown>;
    const route = security['connector_callback'] as Record<string, unknown> | undefined;
    const chunk = (envelope.body as Record<string, unknown>)?.['stream_chunk'] as StreamChunk | undefined;
    if (chunk) entry.chunk = chunk;
    const host = hosts.get(String(route?.['replica_id']));
    const add = (problem: string | undefined) => problem !== undefined && entry.problems.push(problem);
    add(chunk ? undefined : 'body is not a stream_chunk');
    add(roundtripProblem(parsed.value));
    add(principalProblem('to', envelope.to, central.principal, ['id', 'kind', 'did', 'trust_domain']));
    add(host ? signatureProblem(parsed, host.did) : `no host replica ${JSON.stringify(route?.['replica_id'])} is known`);
    add(envelope.from ? undefined : 'from is absent');
    if (entry.problems.length > 0) return notAuthorized(entry.problems.join('; '));
    entry.problems.push(...routeProblems(route, assignments.get(String(route?.['action_id']))));
    add(chunk?.action_id === route?.['action_id'] ? undefined : `chunk.action_id ${JSON.stringify(chunk?.action_id)} is not the route's`);
    add(sentAtProblem(envelope.sent_at, now(), SENT_AT_WINDOW_MS, SENT_AT_WINDOW_MS));
    add(Buffer.byteLength(wireJson(chunk)) <= CHUNK_LIMIT ? undefined : 'the chunk is over 256 KiB');
    if (entry.problems.length > 0) return invalid(entry.problems.join('; '));
    add(principalProblem('from', envelope.from, host!.principal, ['id', 'kind', 'did', 'trust_domain']));
    if (entry.problems.length > 0) return notAuthorized(entry.problems.join('; '));
    // The runtime's own refusal (`RuntimeError::Authorization` through `runtime_error_to_protocol`).
    add(waiting.has(String(chunk?.action_id)) ? undefined : `no central execution of action ${JSON.stringify(chunk?.action_id)} is waiting for it`);
    return entry.problems.length > 0 ? { ...notAuthorized(entry.problems.join('; ')), code: 'auth.not_authorized' } : undefined;
  };

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const entry: ChunkRecord = { arrivedAt: now(), status: 0, problems: [], accepted: false };
    if (request.method !== 'POST' || request.url !== CALLBACK_PATH) return sendText(response, 404, '');
    const body = await readLimitedBody(request, ENVELOPE_LIMIT);
    const parsed = body.ok ? parseWire(body.text) : undefined;
    if (!parsed || 'error' in parsed) {
      entry.problems.push(parsed ? `not JSON: ${parsed.error}` : 'over 4 MiB');
      entry.status = 400;
      record(entry);
      return answer(response, undefined, 400, { error: { error: invalid(entry.problems[0]!) } });
    }
    const refusal = verify(parsed, entry);
    const envelope = parsed.value as unknown as Envelope;
    if (state.mode === 'slow') await sleep(state.slowMs);
    const outcome: Refusal | undefined =
      refusal ??
      (state.mode === 'refuse'
        ? { status: 503, code: 'connector_event.unavailable', category: 'temporary', retryable: true, message: 'connector event ingress unavailable' }
        : undefined);
    entry.status = outcome?.status ?? 200;
    entry.accepted = outcome === undefined;
    record(entry);
    if (!outcome) return answer(response, envelope, 200, { event_stream: { events: [] } });
    const { status, ...error } = outcome;
    answer(response, envelope, status, { error: { error: status === 503 ? { ...error, retry_after_ms: 1000 } : error } });
  };

  const server = await startLoopbackServer(handle, () => record({ arrivedAt: now(), status: 0, problems: ['dropped: ingress down'], accepted: false }));
  return {
    url: `${server.url}${CALLBACK_PATH}`,
    get mode() {
      return state.mode;
    },
    set mode(mode: IngressMode) {
      state.mode = mode;
      server.down = mode === 'down';
    },
    get slowMs() {
      return state.slowMs;
    },
    set slowMs(ms: number) {
      state.slowMs = ms;
    },
    records,
    trustHost: (host) => void hosts.set(host.replicaId, host),
    assign: (route) => void assignments.set(route.action_id, route),
    executing: (actionId, isWaiting) => {
      const count = (waiting.get(actionId) ?? 0) + (isWaiting ? 1 : -1);
      if (count > 0) waiting.set(actionId, count);
      else waiting.delete(actionId);
    },
    accepted: (actionId) => records.filter((entry) => entry.accepted && entry.chunk?.action_id === actionId).map((entry) => entry.chunk!),
    waitFor: (match, what, timeoutMs = 30_000) =>
      waitUntil(
        () => records.find(match),
        (listener) => {
          changes.on('record', listener);
          return () => changes.off('record', listener);
        },
        timeoutMs,
        `callback: ${what}`,
      ),
    close: () => server.close(),
  };
}
