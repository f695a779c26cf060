/**
 * The runtime's lifecycle control plane (`POST /aip/v1/connector-control`, §1.8 and §4 of
 * aip-remote-host.md), as a reference-shaped runtime serves it: axum's plain-text rejections
 * for bodies that do not decode, every request verified (reference decode, byte-equal to its
 * re-serialisation, time window, signed by a trusted host DID), leases granted with the
 * sequence rules, every response signed by the control plane's own DID. Switchable to refuse,
 * be unavailable, answer garbage or unsigned bodies, or be down. Records every request with
 * its arrival time.
 */
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { reserialize } from '../../../src/host/wire/reference-types.js';
import { canonicalJson, parseWire, wireJson } from '../../../src/host/wire/json.js';
import { verifyWithDid, type SigningKey } from '../../../src/host/wire/keys.js';
import { parseRfc3339, rfc3339, timeArray } from '../../../src/host/wire/time.js';
import { CONTROL_PATH, freshKey } from './deployment.js';
import { isJsonContentType, readLimitedBody, sendJson, sendText, startLoopbackServer, waitUntil, type LoopbackServer } from './http.js';

export const CONTROL_BODY_LIMIT = 64 * 1024;
const MAX_LIFETIME_MS = 30_000;
const MAX_FUTURE_SKEW_MS = 5_000;
const RESPONSE_LIFETIME_MS = 30_000;

/** grant: the rules of §4; refuse: 403 `connector_control.rejected`; unavailable: 503; garbage/unsigned: a 200 the host must not trust; down: connections destroyed. */
export type ControlMode = 'grant' | 'refuse' | 'unavailable' | 'garbage' | 'unsigned' | 'down';

export type Operation = 'register' | 'heartbeat' | 'drain' | 'offline';

export interface ControlRecord {
  arrivedAt: number;
  /** 0: dropped while down. */
  status: number;
  text: string;
  operation?: Operation;
  requestId?: string;
  /** The decoded `request` (after the reference re-serialisation). */
  request?: { request_id: string; issued_at: string; expires_at: string; signer_did: string; command: { operation: Operation; payload: Record<string, any> } };
  outcome?: Record<string, any>;
  /** What the verification found wrong; empty for a request the reference would accept. */
  problems: string[];
}

export interface ReplicaLease {
  sequence: number;
  expiresAt: number;
  status: 'ready' | 'draining' | 'offline';
}

export interface ControlPlane {
  /** The full control endpoint (`…/aip/v1/connector-control`). */
  readonly url: string;
  readonly did: string;
  mode: ControlMode;
  readonly records: ControlRecord[];
  lease(replicaId: string): ReplicaLease | undefined;
  /** Resolves with the first record (from index `from`) that `match` accepts. */
  waitFor(match: (record: ControlRecord) => boolean, what: string, options?: { from?: number; timeoutMs?: number }): Promise<ControlRecord>;
  close(): Promise<void>;
}

export interface ControlPlaneOptions {
  /** The host DIDs allowed to sign (one per replica). */
  hostDids: () => readonly string[];
  /** The lease lifetime granted on register and heartbeat. */
  leaseTtlMs: number;
  key?: SigningKey;
  now?: () => number;
  /** Told of every record as it is made (the runtime admits the manifest of a granted registration). */
  onRecord?: (record: ControlRecord) => void;
}

type Outcome = { status: number; outcome: Record<string, any> };

function rejected(code: 'connector_control.rejected' | 'connector_control.unavailable', message: string): Outcome {
  const unavailable = code === 'connector_control.unavailable';
  return { status: unavailable ? 503 : 403, outcome: { status: 'rejected', code, message, retryable: unavailable } };
}

function leaseOutcome(lease: ReplicaLease): Outcome {
  return { status: 200, outcome: { status: 'lease', lease: { sequence: lease.sequence, expires_at: timeArray(lease.expiresAt) } } };
}

/** The problems a reference control plane would refuse a decoded request for (signature, signer, time window). */
/** `signedBytes`: the canonical form of the typed request as parsed from its text (numbers as serde_json read them). */
function verificationProblems(
  request: NonNullable<ControlRecord['request']>,
  signedBytes: string,
  signature: unknown,
  trusted: readonly string[],
  now: number,
): string[] {
  const problems: string[] = [];
  if (!trusted.includes(request.signer_did)) problems.push(`signer_did ${request.signer_did} is not a registered host DID`);
  if (typeof signature !== 'string' || !verifyWithDid(request.signer_did, signedBytes, signature))
    problems.push('signature does not verify over the canonical request');
  const issued = parseRfc3339(request.issued_at);
  const expires = parseRfc3339(request.expires_at);
  if (issued === undefined || expires === undefined) problems.push('issued_at/expires_at are not RFC 3339');
  else {
    if (expires <= issued || expires - issued > MAX_LIFETIME_MS) problems.push(`lifetime ${expires - issued} ms is not within (0, ${MAX_LIFETIME_MS}]`);
    if (issued > now + MAX_FUTURE_SKEW_MS) problems.push(`issued_at is ${issued - now} ms in the future`);
    if (expires < now) problems.push('request expired');
  }
  return problems;
}

/** The replica a command is about (`ConnectorHostControlCommand::replica_id`). */
function replicaOf(command: { operation: Operation; payload: Record<string, any> }): string {
  return String(command.operation === 'register' ? command.payload['replica']?.['id'] : command.payload['replica_id']);
}

export async function startControlPlane(options: ControlPlaneOptions): Promise<ControlPlane> {
  const key = options.key ?? freshKey();
  const now = options.now ?? Date.now;
  const records: ControlRecord[] = [];
  const leases = new Map<string, ReplicaLease>();
  /** Every request id that passed verification: the reference claims it in its replay store before acting. */
  const claimed = new Set<string>();
  /** Each replica's last committed request (`last_control_request_id` / `_digest`). */
  const committed = new Map<string, { requestId: string; digest: string }>();
  const changes = new EventEmitter();
  const state = { mode: 'grant' as ControlMode };

  const record = (entry: ControlRecord): ControlRecord => {
    records.push(entry);
    options.onRecord?.(entry);
    changes.emit('record');
    return entry;
  };

  const signedResponse = (requestId: string, outcome: Record<string, any>, signed = true): string => {
    const at = now();
    const response = { request_id: requestId, issued_at: rfc3339(at), expires_at: rfc3339(at + RESPONSE_LIFETIME_MS), signer_did: key.did, outcome };
    return wireJson(signed ? { response, signature: key.sign(canonicalJson(response)) } : { response });
  };

  /** The sequence rules of §4: fence on previous_sequence, re-registration only after offline or expiry. */
  const apply = (operation: Operation, payload: Record<string, any>, at: number): Outcome => {
    const replicaId = replicaOf({ operation, payload });
    const current = leases.get(replicaId);
    if (operation === 'register') {
      if (current && current.status !== 'offline' && current.expiresAt > at)
        return rejected('connector_control.rejected', `replica ${replicaId} already holds a live lease`);
      const lease: ReplicaLease = { sequence: (current?.sequence ?? 0) + 1, expiresAt: at + options.leaseTtlMs, status: 'ready' };
      leases.set(replicaId, lease);
      return leaseOutcome(lease);
    }
    if (!current) return rejected('connector_control.rejected', `replica ${replicaId} is not registered`);
    if (payload['previous_sequence'] !== current.sequence) return rejected('connector_control.rejected', `replica ${replicaId} lost its lease-sequence fence`);
    if (current.status === 'offline' || (operation === 'heartbeat' && current.expiresAt <= at))
      return rejected('connector_control.rejected', `replica ${replicaId} has no live lease`);
    if (operation === 'offline') {
      leases.set(replicaId, { ...current, sequence: current.sequence + 1, status: 'offline' });
      return { status: 200, outcome: { status: 'offline' } };
    }
    const ready = operation === 'heartbeat' && payload['connector_ready'] === false;
    const lease: ReplicaLease = {
      sequence: current.sequence + 1,
      expiresAt: ready ? at : at + options.leaseTtlMs,
      status: ready ? 'offline' : operation === 'drain' ? 'draining' : current.status,
    };
    leases.set(replicaId, lease);
    return leaseOutcome(lease);
  };

  type Answer = { status: number; text: string; outcome?: Record<string, any> };

  /** What the control plane answers a decoded request in its current mode; only a grant changes a lease. */
  const decide = (request: NonNullable<ControlRecord['request']>, problems: string[], at: number): Answer => {
    if (state.mode === 'garbage') return { status: 200, text: '{"response": garbage' };
    // An unsigned answer changes nothing here: the host must not believe it.
    if (state.mode === 'unsigned') {
      const fake = leaseOutcome({ sequence: 0, expiresAt: at + options.leaseTtlMs, status: 'ready' }).outcome;
      return { status: 200, text: signedResponse(request.request_id, fake, false) };
    }
    const answer = (outcome: Outcome): Answer => ({ ...outcome, text: signedResponse(request.request_id, outcome.outcome) });
    if (problems.length > 0) return answer(rejected('connector_control.rejected', `control request refused: ${problems.join('; ')}`));
    // `process_connector_host_control`: the id is claimed before anything is decided, so a repeat is
    // answered only when it is the replica's last committed request (the lease as it stands now);
    // any other repeat, a refused or failed one included, was consumed.
    const digest = canonicalJson(request);
    const replicaId = replicaOf(request.command);
    const repeat = claimed.has(request.request_id);
    claimed.add(request.request_id);
    if (repeat) {
      const last = committed.get(replicaId);
      const current = leases.get(replicaId);
      if (last?.requestId !== request.request_id || last.digest !== digest || !current) {
        return answer(rejected('connector_control.rejected', `request_id ${request.request_id} was already consumed by another lifecycle state`));
      }
      return answer(request.command.operation === 'offline' ? { status: 200, outcome: { status: 'offline' } } : leaseOutcome(current));
    }
    if (state.mode === 'refuse') return answer(rejected('connector_control.rejected', 'connector-host admission refused by the control plane'));
    if (state.mode === 'unavailable') return answer(rejected('connector_control.unavailable', 'connector control plane unavailable'));
    const applied = apply(request.command.operation, request.command.payload, at);
    if (applied.status === 200) committed.set(replicaId, { requestId: request.request_id, digest });
    return answer(applied);
  };

  const answerDecoded = (entry: ControlRecord, signedBytes: string, signature: unknown, response: ServerResponse, at: number): void => {
    entry.problems.push(...verificationProblems(entry.request!, signedBytes, signature, options.hostDids(), at));
    const answer = decide(entry.request!, entry.problems, at);
    entry.status = answer.status;
    if (answer.outcome) entry.outcome = answer.outcome;
    record(entry);
    sendJson(response, answer.status, answer.text);
  };

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const arrivedAt = now();
    if (request.method !== 'POST' || request.url !== CONTROL_PATH) return sendText(response, 404, '');
    const entry: ControlRecord = { arrivedAt, status: 0, text: '', problems: [] };
    const refuse = (status: number, text: string) => {
      entry.status = status;
      record(entry);
      sendText(response, status, text);
    };
    if (!isJsonContentType(request.headers['content-type'])) return refuse(415, 'Expected request with `Content-Type: application/json`');
    const body = await readLimitedBody(request, CONTROL_BODY_LIMIT);
    if (!body.ok) return refuse(413, 'Failed to buffer the request body: length limit exceeded');
    entry.text = body.text;
    const parsed = parseWire(body.text);
    if ('error' in parsed) return refuse(400, `Failed to parse the request body as JSON: ${parsed.error}`);
    const decoded = reserialize.signedControlRequest(parsed.tree);
    if (!decoded.ok) return refuse(422, `Failed to deserialize the JSON body into the target type: ${decoded.reason}`);
    const value = decoded.value as { request: NonNullable<ControlRecord['request']>; signature?: unknown };
    entry.request = value.request;
    entry.operation = value.request.command.operation;
    entry.requestId = value.request.request_id;
    if (wireJson(value) !== body.text) entry.problems.push('body is not byte-equal to its reference re-serialisation');
    answerDecoded(entry, canonicalJson((decoded.tree as { request: unknown }).request), value.signature, response, arrivedAt);
  };

  const server: LoopbackServer = await startLoopbackServer(handle, () =>
    record({ arrivedAt: now(), status: 0, text: '', problems: ['dropped: control plane down'] }),
  );
  return {
    url: `${server.url}${CONTROL_PATH}`,
    did: key.did,
    get mode() {
      return state.mode;
    },
    set mode(mode: ControlMode) {
      state.mode = mode;
      server.down = mode === 'down';
    },
    records,
    lease: (replicaId) => leases.get(replicaId),
    waitFor: (match, what, { from = 0, timeoutMs = 30_000 } = {}) =>
      waitUntil(
        () => records.slice(from).find(match),
        (listener) => {
          changes.on('record', listener);
          return () => changes.off('record', listener);
        },
        timeoutMs,
        `control request: ${what}`,
      ),
    close: () => server.close(),
  };
}
