import type { MeterProvider, TracerProvider } from '@opentelemetry/api';
import type { Dispatcher } from 'undici';
import type { Logger } from 'pino';
import type { AipAction, AipActionResult, AipCapability, AipManifest, AipStreamChunk, ImplementationSupport } from './contract/aip.js';
import type { RunEvidence, RunLedger } from './ledger/types.js';
import type { JournalOptions } from './journal/types.js';
import type { DeliveryOptions, DeliveryRecord, DeliveryState, DeliveryTarget } from './outbox/types.js';

export * from './contract/aip.js';

export interface HermesEndpointConfig {
  /** Already normalized: 1-128 chars of [a-z0-9_-]. */
  id: string;
  /** http(s) origin only: no user info, query, fragment, or path other than '/'. */
  baseUrl: string;
  /** Bearer token; never serialized, logged or echoed in errors. */
  apiKey?: string;
  displayName?: string;
  /** Binds the endpoint to one verified AIP tenant (fail closed). */
  tenantId?: string;
  /**
   * Operations published besides the five every endpoint has (all off by default): `run_steer: true`
   * publishes steer, which is then sent only where the endpoint declares it (GET /v1/capabilities).
   */
  operations?: { run_steer?: boolean };
}

export interface ConnectorLimits {
  maxJsonResponseBytes?: number;
  maxStreamResponseBytes?: number;
  maxSseFrameBytes?: number;
  defaultMaxEvents?: number;
  /** Largest request body the connector will send (default 16 MiB). */
  maxRequestBodyBytes?: number;
  /**
   * An SSE stream silent for this long (no event, no keepalive) is given up as broken: `stream_incomplete`
   * with a reconciliation read, since the run is not known to have ended (default 90 s: three Hermes keepalive periods).
   */
  sseIdleTimeoutMs?: number;
}

export interface HermesConnectorOptions {
  endpoints: HermesEndpointConfig[];
  logger?: Logger;
  dispatcher?: Dispatcher;
  limits?: ConnectorLimits;
  now?: () => number;
  /** Idempotency records and run evidence (default: createMemoryLedger()). A ledger passed in is not closed by the connector. */
  ledger?: RunLedger;
  /** How long an in-flight idempotency claim lives without renewal before its process is presumed dead (default 30 s). */
  idempotencyLeaseMs?: number;
  /** OpenTelemetry: default the global providers of `@opentelemetry/api` (no-ops until an SDK registers). */
  tracerProvider?: TracerProvider;
  meterProvider?: MeterProvider;
  /** Inject W3C `traceparent`/`tracestate` into Hermes requests through the global propagator (default true). */
  propagateTraceContext?: boolean;
  /**
   * The run event journal (off by default; needs createSqliteLedger or createPostgresLedger): the connector
   * follows every run it starts, keeps its events in the ledger, and run_events reads them from there.
   */
  journal?: JournalOptions;
  /**
   * Standard Webhooks targets the journaled run events are delivered to (none by default; needs `journal`):
   * signed with each one's secret, one event per message. See docs/webhooks.md.
   */
  webhooks?: WebhookConfig[];
  /**
   * Where the outbox delivers the journal's events (advanced: the AIP host and the webhook option feed
   * their targets through here). Needs `journal`; ids must be unique. See docs/delivery.md.
   */
  eventTargets?: DeliveryTarget[];
  /** The outbox's settings: `{ maxAgeMs?, maxPendingPerTarget?, concurrencyPerTarget?, attemptTimeoutMs?, leaseMs? }`. */
  delivery?: DeliveryOptions;
}

/** One Standard Webhooks receiver. */
export interface WebhookConfig {
  /** Where each event is POSTed: https, or http to a loopback host with `allowLoopbackHttp`. No user info. */
  url: string;
  /** An owner-only file (chmod 600) holding the signing secret: `whsec_` and the base64 of 24 to 64 bytes. */
  secretFile: string;
  /** `all` (default) or `lifecycle`: approval requests and answers, and the events that end a run. */
  events?: WebhookEvents;
  /** Allows plain http when the URL's host is loopback (localhost, 127.0.0.0/8, ::1): tests and sidecars (default false). */
  allowLoopbackHttp?: boolean;
  /** How long one delivery attempt may take, connecting to reading the answer's head (default 15000, 100 to 120000). */
  timeoutMs?: number;
}

export type WebhookEvents = 'all' | 'lifecycle';

export interface ApprovalGrant {
  approvalId: string;
  decision: 'approved' | 'denied';
  grantedAt: number;
  expiresAt: number;
  evidence: { reason: string; inputSnapshot: unknown; policyDecision: unknown };
}

export interface ExecutionContext {
  tenantId?: string;
  actor?: { principalId: string; issuer?: string };
  traceId?: string;
  sessionId?: string;
  deadline?: number;
  signal?: AbortSignal;
  approval?: ApprovalGrant;
  onChunk?: (chunk: AipStreamChunk) => void | Promise<void>;
}

export type { EndpointOffer } from './discovery/offer.js';

/** Filters of `deliveries()`: a tenant (null: no tenant; absent: every tenant), a target, a state, and how many at most (default 100, at most 1000). */
export interface DeliveriesOptions {
  tenantId?: string | null;
  targetId?: string;
  state?: DeliveryState;
  limit?: number;
}
import type { EndpointOffer } from './discovery/offer.js';

export interface HermesConnector {
  readonly id: 'hermes-agent';
  manifest(): AipManifest;
  capabilities(): AipCapability[];
  capability(id: string): AipCapability | undefined;
  implementationSupport(capabilityId: string): ImplementationSupport;
  invoke(action: AipAction, context?: ExecutionContext): Promise<AipActionResult>;
  cancel(action: AipAction, context?: ExecutionContext): Promise<AipActionResult | null>;
  /**
   * What the ledger keeps about a run, by action id or run id. `tenantId` (null: no tenant)
   * limits the lookup to that tenant's bindings; without it an id bound by several tenants
   * rejects with AmbiguousEvidenceError.
   */
  evidence(actionIdOrRunId: string, options?: { tenantId?: string | null }): Promise<RunEvidence | null>;
  /** Re-reads the status of every binding that is not terminal; a 404 is recorded as evidence lost. */
  reconcile(): Promise<RunEvidence[]>;
  /**
   * What each configured endpoint declares it offers (`GET /v1/capabilities`), by endpoint id: read at
   * its first use and again after a transport failure (Hermes may have restarted as another release).
   * Reads the declarations not read yet; never rejects.
   */
  offers(): Promise<Record<string, EndpointOffer>>;
  /**
   * The outbox's evidence, newest first: the deliveries of one run (by run id, or the action id that
   * started it), or of every run; `[]` without delivery targets. Never holds a secret.
   */
  deliveries(runIdOrActionId?: string, options?: DeliveriesOptions): Promise<DeliveryRecord[]>;
  close(): Promise<void>;
}
