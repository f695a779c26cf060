/**
 * POST /aip/v1/messages: one signed native AIP envelope in, one envelope out, checked in the
 * reference host's order (`host_message`): schema and decode (400, unsigned), signer (401),
 * recipient and pinned route (403), readiness (503) and capacity (429) for actions, credential
 * revision (403/503), approval import (403/503), then the gateway's replay policy (409) and
 * identity binding (403), and only then execution. Every answer after decoding is signed by the
 * host and correlated with the request. The HTTP server (body limit, routing) is not here.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import type { RunLedger } from '../ledger/types.js';
import type { AipAction, AipActionResult, HermesConnector } from '../types.js';
import { approvalGrant, importApproval } from './approval.js';
import {
  type AuthenticationContext,
  authenticate,
  type EarlyAnswer,
  JSON_TYPE,
  type MessageAnswer,
  signedAnswer,
  TEXT_TYPE,
  unsignedAnswer,
} from './authenticate.js';
import { ChunkDelivery, type DeliveryReport } from './callbacks.js';
import { asObject, checkIdentityClaims, checkRoute, hostError, type PinnedIdentity, type PinnedRoute, type Refusal } from './checks.js';
import {
  abortable,
  actionDeadline,
  CANCEL_WAITS_FOR_START,
  cancelThroughConnector,
  connectorAction,
  type ExecutionBinding,
  executionContext,
  stoppedAfterStartNote,
  wireActionResult,
} from './execute.js';
import type { AuthenticationLane } from './lane.js';
import { ReplayGuard } from './replay.js';
import { checkApprovalAuthorization } from './wire/approval.js';
import type { Envelope } from './wire/envelope.js';
import type { SigningKey } from './wire/keys.js';
import { parseRfc3339 } from './wire/time.js';

export type { MessageAnswer } from './authenticate.js';

/** What the handler reads and keeps current of the host's state (host-life's HostStatus is one). */
export interface HostState {
  /** Actions admitted and not yet answered (`aip_connector_host_in_flight`). */
  inFlight: number;
  /** Check 7: not draining, lease valid, connector ready. */
  admitsActions(): boolean;
  count(counter: 'requests_total' | 'rejected_total'): void;
}

/** Whether a pinned credential revision may be used now (the reference's `CredentialRevisionProvider`). */
export type CredentialVerdict = 'authorized' | 'denied' | 'unavailable';

export interface MessageHandlerDeps {
  connector: HermesConnector;
  /** The run ledger: the replay store and the imported approval records live there. */
  ledger: RunLedger;
  key: SigningKey;
  pinned: PinnedIdentity;
  /** `retry_after_ms` of a not-ready refusal (the reference sends its heartbeat interval). */
  heartbeatMs: number;
  maxInFlight: number;
  status: HostState;
  authorizeCredential(revision: string | null, capabilityId: string): Promise<CredentialVerdict>;
  /** Aborted when the host gives up on the work in flight (the drain timeout): every execution's signal follows it. */
  stopSignal?: AbortSignal;
  logger?: Logger;
  now?: () => number;
  /** Per-attempt timeout of a stream-chunk delivery (default 5 s, the reference's). */
  callbackAttemptTimeoutMs?: number;
  /** The client stream chunks are sent with: the host's outbound agent, which trusts `TLS_CA_FILE` (default: undici's global one). */
  outbound?: Dispatcher;
  /** Where bodies over `largeBodyBytes` are authenticated (checks 1–3) off the event loop; without it, every body is checked in line. */
  lane?: AuthenticationLane;
  largeBodyBytes?: number;
  /** Told of each executed action: its capability, result status (`error`: the connector threw) and seconds from admission to answer. */
  observeAction?: (capabilityId: string, outcome: string, seconds: number) => void;
}

/** One POST to /aip/v1/messages with its complete body. */
export interface MessageRequest {
  body: Buffer;
  headers: IncomingHttpHeaders;
  /** Aborted when the client goes away before its answer: a body still waiting to be authenticated is dropped. */
  signal?: AbortSignal;
}

export interface MessageHandler {
  /** Never rejects: every fault becomes an answer. */
  handle(request: MessageRequest): Promise<MessageAnswer>;
}

/** What a body abandoned by its client gets: nothing, since nobody is left to read an answer (the server sends none to a closed request). */
const ABANDONED: MessageAnswer = { status: 499, body: '', contentType: TEXT_TYPE };

/** An action executing on this host: what a cancel of it needs. */
interface RunningAction {
  action: AipAction;
  controller: AbortController;
  /** Resolves once the connector returned for it (never rejects). */
  settled: Promise<unknown>;
  /** What a cancel that waited for it instead of aborting it answered (undefined: the cancel failed); its result says so. */
  stoppedBy?: Promise<AipActionResult | undefined>;
}

export function createMessageHandler(deps: MessageHandlerDeps): MessageHandler {
  const now = deps.now ?? Date.now;
  const { status } = deps;
  const logFailure = (stage: string, err: string) => deps.logger?.error({ err, stage }, 'connector host message failed');
  const logError = (stage: string) => (error: unknown) => logFailure(stage, error instanceof Error ? error.name : typeof error);
  const replay = new ReplayGuard(deps.ledger, now, logError('purge replay store'));
  const running = new Map<string, RunningAction>();
  // Every action's controller while it executes (by id, `running` keeps only the latest of a retried action).
  const executing = new Set<AbortController>();
  // One listener aborts them all when the host gives up, rather than AbortSignal.any per action: on Node 20
  // a combined signal stays among a long-lived source's dependants for the life of the process.
  deps.stopSignal?.addEventListener(
    'abort',
    () => {
      for (const controller of executing) controller.abort();
    },
    { once: true },
  );
  const binding: ExecutionBinding = {
    connector: deps.connector,
    tenantId: deps.pinned.tenantId,
    gatewayPrincipalId: deps.pinned.gateway.id,
    trustDomain: deps.pinned.gateway.trust_domain ?? '',
    now,
  };
  let permits = 0;
  const signer: AuthenticationContext = { key: deps.key, pinned: deps.pinned, now };
  /** An answer with the counters it moves (checks 1–3 decide theirs, here or in the lane); a signing failure logged. */
  const early = ({ answer, counts, signingError }: EarlyAnswer): MessageAnswer => {
    for (const counter of counts) status.count(counter);
    if (signingError !== undefined) logFailure('sign response', signingError);
    return answer;
  };

  const sign = (httpStatus: number, request: Envelope, messageType: string, body: Record<string, unknown>): MessageAnswer =>
    early({ ...signedAnswer(signer, httpStatus, request, messageType, body), counts: [] });
  const refuse = (request: Envelope, refusal: Refusal): MessageAnswer => {
    status.count('rejected_total');
    return sign(refusal.status, request, 'aip.core.v1.error', { error: { error: refusal.error } });
  };
  const answerResult = (request: Envelope, result: Record<string, unknown>) => sign(200, request, 'aip.core.v1.action_result', { action_result: result });

  const execute = async (request: Envelope, action: Record<string, unknown>, pinnedRoute: PinnedRoute): Promise<MessageAnswer> => {
    const forwarded = connectorAction(action, deps.pinned.tenantId);
    const entry: RunningAction = { action: forwarded, controller: new AbortController(), settled: Promise.resolve() };
    if (deps.stopSignal?.aborted) entry.controller.abort();
    running.set(forwarded.id, entry);
    executing.add(entry.controller);
    const delivery = streamDelivery(request, action, pinnedRoute, entry.controller.signal);
    const started = performance.now();
    let outcome = 'error';
    try {
      const context = executionContext(binding, origin(request), {
        deadline: actionDeadline(deps.connector, action, now()),
        signal: entry.controller.signal,
        ...(pinnedRoute.approval === undefined ? {} : { approval: approvalGrant(pinnedRoute.approval, action) }),
        ...(delivery === undefined ? {} : { onChunk: delivery.deliver }),
      });
      const invocation = deps.connector.invoke(forwarded, context);
      entry.settled = invocation.catch(() => undefined);
      const result = await invocation;
      outcome = result.status;
      const notes = undeliveredNotes(delivery?.report, forwarded.id);
      if (entry.stoppedBy !== undefined) notes.push(stoppedAfterStartNote(await entry.stoppedBy));
      return answerResult(request, wireActionResult(result, notes));
    } finally {
      deps.observeAction?.(forwarded.capability_id, outcome, (performance.now() - started) / 1000);
      executing.delete(entry.controller);
      if (running.get(forwarded.id) === entry) running.delete(forwarded.id);
    }
  };

  const streamDelivery = (request: Envelope, action: Record<string, unknown>, pinnedRoute: PinnedRoute, signal: AbortSignal) => {
    if (action.mode !== 'streaming' || deps.pinned.callbackTarget === undefined || request.from === undefined) return undefined;
    const { approval_authorization: _approval, ...route } = pinnedRoute.route;
    return new ChunkDelivery(
      {
        target: deps.pinned.callbackTarget,
        key: deps.key,
        signer: deps.pinned.host,
        now,
        ...attemptTimeout(deps.callbackAttemptTimeoutMs),
        ...(deps.outbound === undefined ? {} : { dispatcher: deps.outbound }),
      },
      { route, recipient: request.from },
      correlation(request),
      signal,
    );
  };

  const undeliveredNotes = (report: DeliveryReport | undefined, actionId: string): string[] => {
    if (report?.firstUndelivered === undefined) return [];
    deps.logger?.warn(
      { action_id: actionId, first_undelivered: report.firstUndelivered, undelivered: report.undelivered, delivered: report.delivered, reason: report.reason },
      'stream chunks not delivered to the callback target',
    );
    return [
      `${report.undelivered} stream chunk(s) from sequence ${report.firstUndelivered} on were not delivered to the callback target (${report.reason}); this result is complete`,
    ];
  };

  const cancel = async (request: Envelope, cancelBody: Record<string, unknown>, pinnedRoute: PinnedRoute): Promise<MessageAnswer> => {
    const actionId = String(asObject(cancelBody.target)?.action);
    const known = running.get(actionId);
    const context = executionContext(binding, origin(request), { deadline: undefined, signal: deps.stopSignal ?? new AbortController().signal });
    const stop = async (): Promise<AipActionResult> => {
      // Settled first: a start Hermes answered (before the abort, or let finish) has its run in the ledger by now, so the stop finds it.
      await known?.settled;
      return cancelThroughConnector(binding, known?.action, { actionId, capabilityId: pinnedRoute.capabilityId as string }, context);
    };
    if (known === undefined || abortable(deps.connector, known.action)) {
      known?.controller.abort();
      return answerResult(request, wireActionResult(await stop()));
    }
    deps.logger?.info({ action_id: actionId }, CANCEL_WAITS_FOR_START);
    const stopping = stop();
    known.stoppedBy = stopping.catch(() => undefined);
    return answerResult(request, wireActionResult(await stopping));
  };

  /** Everything after the route checks, for a request that passed them. */
  const admitted = async (request: Envelope, pinnedRoute: PinnedRoute, isAction: boolean): Promise<MessageAnswer> => {
    if (pinnedRoute.capabilityId !== undefined) {
      const verdict = await deps.authorizeCredential(pinnedRoute.credentialRevision ?? null, pinnedRoute.capabilityId).catch(() => 'unavailable' as const);
      if (verdict !== 'authorized') return refuse(request, credentialRefusal(verdict));
    }
    if (pinnedRoute.approval !== undefined) {
      const outcome = await importApproval(deps.ledger, pinnedRoute.approval, deps.pinned.tenantId, now()).catch((error: unknown) => {
        logError('import approval')(error);
        return 'unavailable' as const;
      });
      if (outcome !== 'imported') return refuse(request, approvalRefusal(outcome));
    }
    if (!isAction) return gateway(request, pinnedRoute);
    // As the reference counts it: an action is in flight from here (its replay check included) to its answer.
    status.inFlight++;
    try {
      return await gateway(request, pinnedRoute);
    } finally {
      status.inFlight--;
    }
  };

  /** What the reference's gateway does with an admitted envelope: replay policy, identity binding, then the body. */
  const gateway = async (request: Envelope, pinnedRoute: PinnedRoute): Promise<MessageAnswer> => {
    const replayVerdict = await replay.admit(request.message_id, parseRfc3339(request.sent_at) ?? Number.NaN).catch((error: unknown) => {
      logError('replay store')(error);
      return { failed: true } as const;
    });
    if (replayVerdict !== undefined) {
      if ('failed' in replayVerdict) return refuse(request, executionRefusal('runtime error: storage error: the replay store could not be reached'));
      return refuse(request, { status: 409, error: hostError('connector_host.replay', replayVerdict.refused, 'policy', false) });
    }
    const action = asObject(request.body.action);
    if (action !== undefined) {
      const mismatch = checkIdentityClaims(action, deps.pinned);
      if (mismatch !== undefined) return refuse(request, mismatch);
      return execute(request, action, pinnedRoute).catch((error: unknown) => {
        logError('execute action')(error);
        return refuse(request, executionRefusal('runtime error: the connector failed while executing the action'));
      });
    }
    const cancelBody = asObject(request.body.cancel);
    if (cancelBody !== undefined) {
      return cancel(request, cancelBody, pinnedRoute).catch((error: unknown) => {
        logError('cancel action')(error);
        return refuse(request, executionRefusal('runtime error: the connector failed while cancelling the action'));
      });
    }
    return refuse(request, executionRefusal('unsupported message type'));
  };

  const handle = async ({ body: rawBody, headers, signal }: MessageRequest): Promise<MessageAnswer> => {
    if (!isJsonContentType(headers['content-type'])) {
      return { status: 415, body: 'Expected request with `Content-Type: application/json`', contentType: TEXT_TYPE };
    }
    let verified = false;
    if (deps.lane !== undefined && rawBody.length > (deps.largeBodyBytes ?? 0)) {
      const outcome = await deps.lane.authenticate(rawBody, signal);
      if (outcome === 'abandoned') return ABANDONED;
      if (outcome !== 'authenticated') return early(outcome);
      verified = true;
    }
    const authenticated = authenticate(rawBody, signer, verified);
    if ('early' in authenticated) return early(authenticated.early);
    status.count('requests_total');
    const { request } = authenticated;
    const pinnedRoute = checkRoute(request, deps.pinned, (record, action) => checkApprovalAuthorization(record, action, deps.pinned.tenantId, now()));
    if ('status' in pinnedRoute) return refuse(request, pinnedRoute);
    const isAction = request.body.action !== undefined;
    if (!isAction) return admitted(request, pinnedRoute, false);
    if (!status.admitsActions()) {
      return refuse(request, {
        status: 503,
        error: hostError('connector_host.not_ready', 'connector host is draining or its lease is not valid', 'temporary', true, deps.heartbeatMs),
      });
    }
    if (permits >= deps.maxInFlight) {
      return refuse(request, {
        status: 429,
        error: hostError('connector_host.capacity', 'connector host local concurrency capacity is exhausted', 'temporary', true, 100),
      });
    }
    permits++;
    try {
      return await admitted(request, pinnedRoute, true);
    } finally {
      permits--;
    }
  };
  return {
    handle: (request) =>
      handle(request).catch((error: unknown) => {
        logError('handle message')(error);
        return unsignedAnswer(500, 'connector_host.internal', 'the connector host failed while answering this message');
      }),
  };
}

function executionRefusal(message: string): Refusal {
  return { status: 502, error: hostError('connector_host.execution', message, 'connector', false) };
}

function credentialRefusal(verdict: Exclude<CredentialVerdict, 'authorized'>): Refusal {
  return verdict === 'denied'
    ? { status: 403, error: hostError('connector_host.credential_revision_denied', 'pinned credential revision is not authorized', 'auth', false) }
    : {
        status: 503,
        error: hostError('connector_host.credential_revision_unavailable', 'credential revision authority is unavailable', 'temporary', true, 1_000),
      };
}

function approvalRefusal(outcome: 'conflict' | 'unavailable'): Refusal {
  return outcome === 'conflict'
    ? {
        status: 403,
        error: hostError('connector_host.approval_authorization_conflict', 'connector-host approval authorization conflicts with durable state', 'auth', false),
      }
    : {
        status: 503,
        error: hostError(
          'connector_host.approval_authorization_unavailable',
          'connector-host approval authorization journal is unavailable',
          'temporary',
          true,
          1_000,
        ),
      };
}

function origin(request: Envelope) {
  return { traceId: traceIdOf(request), sessionId: request.session_id };
}

/** The envelope trace's id when it names one, else the correlation id. */
function traceIdOf(request: Envelope): string | undefined {
  const trace = asObject(request.trace);
  const id = trace?.trace_id ?? trace?.traceparent;
  return typeof id === 'string' ? id : request.correlation_id;
}

function correlation(request: Envelope): Pick<Envelope, 'session_id' | 'correlation_id'> {
  return {
    ...(request.session_id === undefined ? {} : { session_id: request.session_id }),
    ...(request.correlation_id === undefined ? {} : { correlation_id: request.correlation_id }),
  };
}

function attemptTimeout(ms: number | undefined): { attemptTimeoutMs?: number } {
  return ms === undefined ? {} : { attemptTimeoutMs: ms };
}

/** axum's `Json` extractor: `application/json` or any `application/*+json`, parameters allowed. */
function isJsonContentType(header: string | string[] | undefined): boolean {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined) return false;
  const essence = (value.split(';')[0] ?? '').trim().toLowerCase();
  return essence === JSON_TYPE || (essence.startsWith('application/') && essence.endsWith('+json'));
}
