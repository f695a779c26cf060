/**
 * The central side's dispatcher, as `NativeAipHttpDispatcher` builds and sends (§1.3, §1.5):
 * the route object with its 14 keys (plus `approval_authorization` for an approved action),
 * the action rewritten (tenant, no callback, async → sync, the streaming callback), signed
 * with the gateway key, POSTed with `AIP-Trust-Domain` and `Idempotency-Key`, a 5 s timeout,
 * the SAME signed envelope re-sent on transport errors after 50 ms · 2^n. Every response is
 * checked as `verify_peer_response` does, plus `response_roundtrips_reference_serde`; each
 * check carries its name.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { signEnvelope, type Envelope, type Principal } from '../../../src/host/wire/envelope.js';
import { correlationId, messageId } from '../../../src/host/wire/ids.js';
import { parseWire, wireJson } from '../../../src/host/wire/json.js';
import { rfc3339 } from '../../../src/host/wire/time.js';
import type { CallbackIngress, HostIdentity } from './callback-ingress.js';
import { CANCEL_REASON, NATIVE_HTTP_PROFILE, TRUST_DOMAIN, hexId, type ConnectorRoute, type OriginalMode, type Party } from './deployment.js';
import { check, principalProblem, roundtripProblem, sentAtProblem, signatureProblem, type NamedCheck } from './envelope-checks.js';

export const REQUEST_TIMEOUT_MS = 5_000;
export const RETRY_BUDGET = 2;
const RESPONSE_LIMIT = 4 * 1024 * 1024;
const RESPONSE_SENT_AT_WINDOW_MS = 5 * 60_000;

/** One replica as the central registry pins it. */
export interface HostTarget {
  /** `…/aip/v1/messages` */
  readonly url: string;
  readonly identity: HostIdentity;
  readonly tenantId: string;
  readonly instanceId: string;
  readonly versionId: string;
  readonly manifestDigest: string;
}

export interface AipAction {
  id: string;
  capability_id: string;
  input: unknown;
  mode?: 'sync' | 'async' | 'streaming';
  [field: string]: unknown;
}

export interface ActionOptions {
  /** The route's `approval_authorization` (an ApprovalRecord). */
  approvalRecord?: unknown;
  /** Fields of the route to change (tests of the host's route checks). */
  route?: Partial<ConnectorRoute>;
  omitRoute?: boolean;
  to?: Principal;
  sentAt?: number;
  sessionId?: string;
  /** Another signer (an untrusted key). */
  signer?: Party;
  /** Kept on the action even when not streaming (the host must refuse it). */
  keepCallback?: boolean;
  /** Changes the signed envelope after signing (the signature then no longer covers it). */
  tamper?: (envelope: Envelope) => void;
}

export interface Prepared {
  readonly target: HostTarget;
  readonly envelope: Envelope;
  readonly text: string;
  readonly headers: Record<string, string>;
  readonly route?: ConnectorRoute;
}

export interface Exchange {
  /** 0 when no HTTP answer arrived. */
  status: number;
  text: string;
  attempts: number;
  transportError?: string;
}

export interface ProtocolError {
  code: string;
  message: string;
  category: string;
  retryable: boolean;
  retry_after_ms?: number;
  [field: string]: unknown;
}

export interface Verdict {
  envelope?: Envelope;
  actionResult?: { action_id: string; status: string; output?: unknown; error?: ProtocolError; [field: string]: unknown };
  error?: ProtocolError;
  checks: NamedCheck[];
  /** `name: detail` of every failed check. */
  failed: string[];
}

export interface Outcome {
  prepared: Prepared;
  exchange: Exchange;
  verdict: Verdict;
}

function rewriteAction(action: AipAction, tenantId: string, callback: unknown): AipAction {
  const { callback: _dropped, ...rest } = action;
  const identity = (action['identity'] ?? {}) as Record<string, any>;
  const claimed = identity['tenant']?.['id'];
  if (claimed !== undefined && claimed !== tenantId) throw new Error(`the action claims tenant ${claimed}, not the verified ${tenantId}`);
  return {
    ...rest,
    ...(action.mode === 'async' ? { mode: 'sync' as const } : {}),
    identity: { ...identity, tenant: identity['tenant'] ?? { id: tenantId } },
    ...(callback === undefined ? {} : { callback }),
  };
}

/** The route the central side pins for an action on this replica (`connector_route_metadata`), with a fresh fence token. */
export function pinnedRoute(target: HostTarget, action: Pick<AipAction, 'id' | 'capability_id' | 'mode'>): ConnectorRoute {
  const originalMode: OriginalMode = action.mode ?? null;
  return {
    action_id: action.id,
    capability_id: action.capability_id,
    tenant_id: target.tenantId,
    instance_id: target.instanceId,
    replica_id: target.identity.replicaId,
    version_id: target.versionId,
    manifest_digest: target.manifestDigest,
    catalog_revision: 1,
    binding_policy_revision: 1,
    credential_revision_ref: null,
    quota_policy_ref: null,
    replica_health_revision: 1,
    fence_token: hexId('route_'),
    original_mode: originalMode,
  };
}

function withoutApproval(route: ConnectorRoute): ConnectorRoute {
  const { approval_authorization: _approval, ...rest } = route;
  return rest;
}

async function readCapped(body: AsyncIterable<Buffer>, declared: number): Promise<string> {
  if (declared > RESPONSE_LIMIT) throw new Error(`response Content-Length ${declared} is over 4 MiB`);
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of body) {
    size += part.length;
    if (size > RESPONSE_LIMIT) throw new Error('response body is over 4 MiB');
    parts.push(part);
  }
  return Buffer.concat(parts).toString('utf8');
}

export interface SendOptions {
  timeoutMs?: number;
  retryBudget?: number;
  signal?: AbortSignal;
}

export interface Dispatcher {
  prepareAction(target: HostTarget, action: AipAction, options?: ActionOptions): Prepared;
  /** A cancel of an action this dispatcher routed before (its durable assignment); `target` defaults to `{action}`. */
  prepareCancel(target: HostTarget, actionId: string, options?: ActionOptions & { cancelTarget?: Record<string, string> }): Prepared;
  /** `signal` gives up early, as a timeout would (a transport error, retried like one). */
  send(prepared: Prepared, options?: SendOptions): Promise<Exchange>;
  verify(prepared: Prepared, exchange: Exchange): Verdict;
  invoke(target: HostTarget, action: AipAction, options?: ActionOptions & SendOptions): Promise<Outcome>;
  cancel(target: HostTarget, actionId: string, options?: ActionOptions & SendOptions & { cancelTarget?: Record<string, string> }): Promise<Outcome>;
}

export function createDispatcher(gateway: Party, ingress: CallbackIngress, now: () => number = Date.now): Dispatcher {
  const assignments = new Map<string, ConnectorRoute>();

  const seal = (
    target: HostTarget,
    body: Record<string, unknown>,
    route: ConnectorRoute | undefined,
    idempotencyKey: (id: string) => string,
    options: ActionOptions,
  ): Prepared => {
    const envelope: Envelope = {
      aip_version: '1.0',
      message_type: 'action' in body ? 'aip.core.v1.action' : 'aip.core.v1.cancel',
      message_id: messageId(),
      sent_at: rfc3339(options.sentAt ?? now()),
      body,
      ...(options.sessionId ? { session_id: options.sessionId } : {}),
      correlation_id: correlationId(),
      to: options.to ?? { id: target.identity.principal.id, kind: target.identity.principal.kind },
      security: { ...(options.omitRoute || !route ? {} : { connector_route: route }), trust_domain: TRUST_DOMAIN },
    };
    const signer = options.signer ?? gateway;
    const signed = signEnvelope(envelope, signer.key, signer.principal);
    let text = signed.text;
    if (options.tamper) {
      const copy = JSON.parse(text) as Envelope;
      options.tamper(copy);
      text = wireJson(copy);
    }
    const headers = { 'content-type': 'application/json', 'aip-trust-domain': TRUST_DOMAIN, 'idempotency-key': idempotencyKey(signed.envelope.message_id) };
    return { target, envelope: JSON.parse(text) as Envelope, text, headers, ...(route ? { route } : {}) };
  };

  const prepareAction = (target: HostTarget, action: AipAction, options: ActionOptions = {}): Prepared => {
    const route: ConnectorRoute = {
      ...pinnedRoute(target, action),
      ...(options.approvalRecord === undefined ? {} : { approval_authorization: options.approvalRecord }),
      ...options.route,
    };
    assignments.set(action.id, route);
    ingress.assign(withoutApproval(route));
    const callback =
      action.mode === 'streaming'
        ? {
            profile: NATIVE_HTTP_PROFILE,
            target: ingress.url,
            metadata: { connector_callback: withoutApproval(route), connector_callback_recipient: gateway.principal },
          }
        : options.keepCallback
          ? action['callback']
          : undefined;
    return seal(target, { action: rewriteAction(action, target.tenantId, callback) }, route, () => action.id, options);
  };

  const prepareCancel: Dispatcher['prepareCancel'] = (target, actionId, options = {}) => {
    const assigned = assignments.get(actionId);
    if (!assigned) throw new Error(`action ${actionId} has no durable route assignment`);
    const route = { ...withoutApproval(assigned), original_mode: null, ...options.route };
    const body = { cancel: { target: options.cancelTarget ?? { action: actionId }, reason: CANCEL_REASON } };
    return seal(target, body, route, (id) => id, options);
  };

  /** As the central runtime, which holds a streaming action as executing only while it waits for the POST. */
  const send: Dispatcher['send'] = async (prepared, options = {}) => {
    const streaming = (prepared.envelope.body as { action?: { id: string; mode?: string } }).action;
    if (streaming?.mode !== 'streaming') return post(prepared, options);
    ingress.executing(streaming.id, true);
    try {
      return await post(prepared, options);
    } finally {
      ingress.executing(streaming.id, false);
    }
  };

  const post: Dispatcher['send'] = async (prepared, { timeoutMs = REQUEST_TIMEOUT_MS, retryBudget = RETRY_BUDGET, signal } = {}) => {
    for (let attempt = 0; ; attempt++) {
      let response: Awaited<ReturnType<typeof request>>;
      try {
        response = await request(prepared.target.url, {
          method: 'POST',
          headers: prepared.headers,
          body: prepared.text,
          signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs),
        });
      } catch (error) {
        if (attempt >= retryBudget) return { status: 0, text: '', attempts: attempt + 1, transportError: String(error) };
        await sleep(50 * 2 ** attempt);
        continue;
      }
      try {
        const text = await readCapped(response.body, Number(response.headers['content-length'] ?? 0));
        return { status: response.statusCode, text, attempts: attempt + 1 };
      } catch (error) {
        response.body.destroy();
        return { status: response.statusCode, text: '', attempts: attempt + 1, transportError: String(error) };
      }
    }
  };

  const verify: Dispatcher['verify'] = (prepared, exchange) => {
    const checks: NamedCheck[] = [];
    const done = (): Verdict => ({ ...verdict, checks, failed: checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`) });
    const verdict: Omit<Verdict, 'checks' | 'failed'> = {};
    if (exchange.transportError !== undefined) {
      checks.push(check('transport', exchange.transportError));
      return done();
    }
    const parsed = parseWire(exchange.text);
    if ('error' in parsed) {
      checks.push(check('response.decode', `HTTP ${exchange.status} body is not JSON (${parsed.error}): ${JSON.stringify(exchange.text.slice(0, 200))}`));
      return done();
    }
    const envelope = parsed.value as unknown as Envelope;
    verdict.envelope = envelope;
    const request = prepared.envelope;
    const host = prepared.target.identity;
    checks.push(
      check('verify_peer_response.signature', signatureProblem(parsed, host.did)),
      check('verify_peer_response.from', principalProblem('from', envelope.from, host.principal, ['id', 'kind'])),
      check('verify_peer_response.to', principalProblem('to', envelope.to, gateway.principal, ['id', 'kind'])),
      check(
        'verify_peer_response.correlation_id',
        envelope.correlation_id === request.correlation_id ? undefined : `correlation_id ${envelope.correlation_id} is not ${request.correlation_id}`,
      ),
      check(
        'verify_peer_response.in_response_to',
        envelope.in_response_to === request.message_id ? undefined : `in_response_to ${JSON.stringify(envelope.in_response_to)} is not ${request.message_id}`,
      ),
      check('verify_peer_response.sent_at', sentAtProblem(envelope.sent_at, now(), RESPONSE_SENT_AT_WINDOW_MS, RESPONSE_SENT_AT_WINDOW_MS)),
      check('action.sync.response_roundtrips_reference_serde', roundtripProblem(parsed.value)),
    );
    const body = (envelope.body ?? {}) as Record<string, any>;
    const expectedActionId = prepared.route?.action_id;
    if (body['action_result']) {
      verdict.actionResult = body['action_result'];
      checks.push(
        check(
          'accepted_reply.action_id',
          body['action_result'].action_id === expectedActionId ? undefined : `action_result for ${body['action_result'].action_id}, not ${expectedActionId}`,
        ),
      );
    } else if (body['error']?.['error']) verdict.error = body['error']['error'];
    else checks.push(check('accepted_reply.body', `body ${Object.keys(body).join(',')} is neither action_result nor error`));
    return done();
  };

  const exchange = async (prepared: Prepared, options: SendOptions = {}): Promise<Outcome> => {
    const answer = await send(prepared, options);
    return { prepared, exchange: answer, verdict: verify(prepared, answer) };
  };

  return {
    prepareAction,
    prepareCancel,
    send,
    verify,
    invoke: (target, action, options) => exchange(prepareAction(target, action, options), options),
    cancel: (target, actionId, options) => exchange(prepareCancel(target, actionId, options), options),
  };
}
