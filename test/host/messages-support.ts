/**
 * The message handler in-process against a real connector over the Hermes simulator and a real
 * ledger, with envelopes signed by the gateway key as a reference runtime signs them, and a real
 * callback ingress on loopback for streaming actions.
 */
import { createServer, type IncomingMessage, type RequestListener, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Dispatcher } from 'undici';
import type { Logger } from 'pino';
import { afterAll } from 'vitest';
import { createHermesConnector, type HermesConnector, type RunLedger } from 'aip-connector-hermes-agent';
import { type HermesSimulator, type RunStep, startHermesSimulator } from 'aip-connector-hermes-agent/simulator';
import { createMessageHandler, type CredentialVerdict, type MessageAnswer, type MessageHandler } from '../../src/host/messages.js';
import { HostStatus } from '../../src/host/metrics.js';
import type { PinnedIdentity } from '../../src/host/checks.js';
import { type Envelope, type Principal, signEnvelope, verifyEnvelopeText } from '../../src/host/wire/envelope.js';
import { correlationId, messageId } from '../../src/host/wire/ids.js';
import { parseWire, wireJson } from '../../src/host/wire/json.js';
import { reserialize } from '../../src/host/wire/reference-types.js';
import { type SigningKey, signingKeyFromSeed } from '../../src/host/wire/keys.js';
import { rfc3339, timeArray } from '../../src/host/wire/time.js';
import { DURABLE_BACKENDS } from '../helpers/ledgers.js';

export const API_KEY = 'sim-key-for-host-messages';
export const TENANT = 'tenant-acme';
export const ENDPOINT = 'local';
export const cap = (operation: string) => `cap:hermes_agent:${ENDPOINT}:${operation}`;

export const hostKey: SigningKey = signingKeyFromSeed(new Uint8Array(32).fill(0x1d));
export const gatewayKey: SigningKey = signingKeyFromSeed(new Uint8Array(32).fill(0x2e));
export const strangerKey: SigningKey = signingKeyFromSeed(new Uint8Array(32).fill(0x3f));
export const hostPrincipal: Principal = { id: 'service:connector:hermes', kind: 'service', trust_domain: 'connectors.test' };
export const gatewayPrincipal: Principal = { id: 'service:getaip:server', kind: 'service', trust_domain: 'connectors.test' };
export const MANIFEST_DIGEST = `sha256:${'b'.repeat(64)}`;
export const HEARTBEAT_MS = 10_000;

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** What the callback ingress received: each body as sent, and its parsed envelope. */
export interface Ingress {
  target: string;
  received: Array<{ text: string; envelope: Envelope }>;
  /** The status of each next answer (default 200 once these run out). */
  answers: number[];
  /** Resolved before each answer: lets a test hold the ingress (a slow runtime). */
  gate?: () => Promise<void>;
  /** Every POST received, answered or not. */
  attempts: number;
}

/** A callback ingress on loopback; over HTTPS with `tls` (a key and certificate). */
export async function startIngress(tls?: { key: string; cert: string }): Promise<Ingress> {
  const ingress: Ingress = { target: '', received: [], answers: [], attempts: 0 };
  const answer: RequestListener = async (req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    ingress.attempts++;
    await ingress.gate?.();
    const status = ingress.answers.shift() ?? 200;
    if (status === 200) ingress.received.push({ text, envelope: JSON.parse(text) as Envelope });
    res.writeHead(status, { 'content-type': 'application/json' }).end('{}');
  };
  const server: Server = tls === undefined ? createServer(answer) : createHttpsServer(tls, answer);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const scheme = tls === undefined ? 'http' : 'https';
  ingress.target = `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}/aip/v1/connector-callbacks`;
  cleanups.push(() => new Promise((resolve) => server.close(() => resolve())));
  return ingress;
}

export interface HostUnderTest {
  handler: MessageHandler;
  status: HostStatus;
  sim: HermesSimulator;
  connector: HermesConnector;
  ledger: RunLedger;
  pinned: PinnedIdentity;
  /** The credential revision the host accepts (null: none configured). */
  credential: { current: string | null; unavailable: boolean };
  stop: AbortController;
  /** Posts the text as a runtime would; the answer, and its envelope when it is one. */
  post(text: string, contentType?: string): Promise<Answer>;
}

export interface Answer extends MessageAnswer {
  json: Record<string, unknown>;
  envelope: Envelope;
}

export interface HostOptions {
  ledger?: RunLedger;
  sim?: HermesSimulator;
  script?: (body: Record<string, unknown>) => RunStep[];
  callbackTarget?: string;
  maxInFlight?: number;
  replicaId?: string;
  callbackAttemptTimeoutMs?: number;
  /** The host's clock (default Date.now). */
  now?: () => number;
  /** The client stream chunks are sent with (default undici's global one). */
  outbound?: Dispatcher;
  /** Where the connector reaches Hermes (default the simulator itself; e.g. a gate in front of it). */
  hermesUrl?: string;
  logger?: Logger;
}

export async function startHost(options: HostOptions = {}): Promise<HostUnderTest> {
  const sim = options.sim ?? (await startHermesSimulator({ apiKey: API_KEY, ...(options.script ? { script: options.script } : {}) }));
  if (!options.sim) cleanups.push(() => sim.close());
  const ledger = options.ledger ?? (await DURABLE_BACKENDS[0]!.create()).ledger;
  const connector = createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: options.hermesUrl ?? sim.url, apiKey: API_KEY, tenantId: TENANT }], ledger });
  cleanups.push(() => connector.close());
  const status = new HostStatus();
  status.connectorReady = true;
  status.lease = { sequence: 1, expiresAtMs: Date.now() + 10 * 60_000 };
  const pinned: PinnedIdentity = {
    host: { ...hostPrincipal, did: hostKey.did },
    gateway: gatewayPrincipal,
    gatewayDid: gatewayKey.did,
    tenantId: TENANT,
    instanceId: 'cinst_hermes_acme',
    replicaId: options.replicaId ?? 'crepl_hermes_acme_1',
    versionId: 'cver_hermes_1',
    manifestDigest: MANIFEST_DIGEST,
    callbackTarget: options.callbackTarget,
  };
  const credential = { current: null as string | null, unavailable: false };
  const stop = new AbortController();
  const handler = createMessageHandler({
    connector,
    ledger,
    key: hostKey,
    pinned,
    heartbeatMs: HEARTBEAT_MS,
    maxInFlight: options.maxInFlight ?? 32,
    status,
    authorizeCredential: async (revision): Promise<CredentialVerdict> => {
      if (credential.unavailable) return 'unavailable';
      return revision === credential.current ? 'authorized' : 'denied';
    },
    stopSignal: stop.signal,
    ...(options.callbackAttemptTimeoutMs === undefined ? {} : { callbackAttemptTimeoutMs: options.callbackAttemptTimeoutMs }),
    ...(options.now === undefined ? {} : { now: options.now }),
    ...(options.outbound === undefined ? {} : { outbound: options.outbound }),
    ...(options.logger === undefined ? {} : { logger: options.logger }),
  });
  const post = async (text: string, contentType = 'application/json'): Promise<Answer> => {
    const answer = await handler.handle({ body: Buffer.from(text, 'utf8'), headers: { 'content-type': contentType } });
    let json: Record<string, unknown> = {};
    try {
      json = JSON.parse(answer.body) as Record<string, unknown>;
    } catch {
      // a plain-text answer
    }
    return { ...answer, json, envelope: json as unknown as Envelope };
  };
  return { handler, status, sim, connector, ledger, pinned, credential, stop, post };
}

/** The route a reference dispatcher pins for an action on this host. */
export function routeFor(host: HostUnderTest, actionId: string, capabilityId: string, originalMode: string | null = null): Record<string, unknown> {
  return {
    action_id: actionId,
    capability_id: capabilityId,
    tenant_id: TENANT,
    instance_id: host.pinned.instanceId,
    replica_id: host.pinned.replicaId,
    version_id: host.pinned.versionId,
    manifest_digest: MANIFEST_DIGEST,
    catalog_revision: 1,
    binding_policy_revision: 1,
    credential_revision_ref: null,
    quota_policy_ref: null,
    replica_health_revision: 1,
    fence_token: `route_${actionId.slice(4)}`,
    original_mode: originalMode,
  };
}

export const actionId = () => `act_${messageId().slice(4)}`;

/** An envelope as the reference dispatcher builds it, before signing. */
export function actionEnvelope(host: HostUnderTest, action: Record<string, unknown>, route?: Record<string, unknown>): Envelope {
  return {
    aip_version: '1.0',
    message_type: 'aip.core.v1.action',
    message_id: messageId(),
    sent_at: rfc3339(Date.now()),
    body: { action },
    correlation_id: correlationId(),
    to: { id: hostPrincipal.id, kind: hostPrincipal.kind },
    security: {
      connector_route:
        route ?? routeFor(host, String(action.id), String(action.capability_id), (action.mode as string | undefined) === 'streaming' ? 'streaming' : null),
      trust_domain: 'connectors.test',
    },
  };
}

export function cancelEnvelope(target: Record<string, unknown>, route: Record<string, unknown>): Envelope {
  return {
    aip_version: '1.0',
    message_type: 'aip.core.v1.cancel',
    message_id: messageId(),
    sent_at: rfc3339(Date.now()),
    body: { cancel: { target, reason: 'cancelled by the AIP connector fleet runtime' } },
    correlation_id: correlationId(),
    to: { id: hostPrincipal.id, kind: hostPrincipal.kind },
    security: { connector_route: route, trust_domain: 'connectors.test' },
  };
}

/** Signed by the gateway (or another key), as `sign_peer_request` does: the wire text. */
export function signed(envelope: Envelope, key: SigningKey = gatewayKey, signer: Principal = gatewayPrincipal): string {
  return signEnvelope(envelope, key, signer).text;
}

/** The central side's `verify_peer_response` checks on a host answer; returns the failed check, or undefined. */
export function peerResponseProblem(answer: Answer, request: Envelope): string | undefined {
  const parsed = parseWire(answer.body);
  if ('error' in parsed) return 'not JSON';
  if (!verifyEnvelopeText(parsed, hostKey.did)) return 'signature';
  if (!roundTrips(answer.body)) return 'not a fixed point of the reference types';
  const response = answer.envelope;
  if (response.from?.id !== hostPrincipal.id || response.from?.kind !== hostPrincipal.kind || response.from?.did !== hostKey.did) return 'from';
  if (response.from?.trust_domain !== hostPrincipal.trust_domain) return 'from.trust_domain';
  if (JSON.stringify(response.to) !== JSON.stringify(request.from)) return 'to';
  if (response.correlation_id !== request.correlation_id) return 'correlation_id';
  if (response.session_id !== request.session_id) return 'session_id';
  if (response.in_response_to !== request.message_id) return 'in_response_to';
  if (response.message_id === request.message_id || !/^msg_[0-9a-f]{32}$/.test(response.message_id)) return 'message_id';
  if (Math.abs(Date.parse(response.sent_at) - Date.now()) > 5 * 60_000) return 'sent_at';
  return undefined;
}

/** `response_roundtrips_reference_serde`: the text equals its re-serialisation through the reference Envelope type. */
export function roundTrips(text: string): boolean {
  const parsed = parseWire(text);
  if ('error' in parsed) return false;
  const typed = reserialize.envelope(parsed.tree);
  return typed.ok && wireJson(typed.tree) === text;
}

/** The protocol error of a signed error answer. */
export function errorOf(answer: Answer): Record<string, unknown> {
  return ((answer.json.body as Record<string, unknown>)?.error as Record<string, unknown>)?.error as Record<string, unknown>;
}

export function resultOf(answer: Answer): Record<string, unknown> {
  return (answer.json.body as Record<string, unknown>)?.action_result as Record<string, unknown>;
}

/** A request that went through gateway signing, parsed back: what the runtime sent. */
export function sentEnvelope(text: string): Envelope {
  return JSON.parse(text) as Envelope;
}

/** An ApprovalRecord as the reference gateway pins it: approved by one principal, replayable from its decisions. */
export function approvalFor(action: Record<string, unknown>, options: { approvalId?: string; policyHash?: string; tenant?: string; reason?: string } = {}) {
  const now = Date.now();
  const approvalId = options.approvalId ?? `appr_${actionId().slice(4)}`;
  const policyHash = options.policyHash ?? 'a'.repeat(64);
  const decision = {
    approval_id: approvalId,
    decision: 'approved',
    approver: { id: 'human:approver', kind: 'human' },
    decided_at: rfc3339(now),
    reason: options.reason ?? 'approved for the host test',
    decision_id: `decision:${approvalId}`,
    policy_hash: policyHash,
  };
  const selector = { type: 'principal', id: 'human:approver' };
  const record = {
    request: {
      id: approvalId,
      action_id: action.id,
      capability_id: action.capability_id,
      requester: { ...gatewayPrincipal },
      subject: { ...gatewayPrincipal },
      approver_selector: selector,
      reason: 'host approval test',
      expires_at: rfc3339(now + 60_000),
      policy_decision_id: `policy:${String(action.id)}`,
      identity: { tenant: { id: options.tenant ?? TENANT } },
      policy_snapshot: {
        required: true,
        reason: 'host approval test',
        approver_selector: selector,
        ttl_ms: 60_000,
        minimum_distinct_principals: 1,
        separation_of_duties: { requester_must_differ: false, operator_must_differ: false, allow_self_approval: false },
      },
      policy_hash: policyHash,
    },
    status: 'approved',
    decision,
    decisions: [
      {
        decision,
        authority: {
          principal_id: 'human:approver',
          tenant_id: TENANT,
          roles: [],
          groups: [],
          tenant_policies: [],
          external_systems: [],
          delegated_scopes: [],
          revision: 1,
          revoked: false,
        },
        evidence_hash: 'b'.repeat(64),
        recorded_at: timeArray(now),
      },
    ],
    created_at: timeArray(now),
    updated_at: timeArray(now),
  };
  return { record, decision };
}
