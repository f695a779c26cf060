import type { MeterProvider, TracerProvider } from '@opentelemetry/api';
import type { Dispatcher } from 'undici';
import type { Logger } from 'pino';
import type { RunEvidence, RunLedger } from './ledger/types.js';

/** The five Hermes run operations published for every endpoint. */
export const OPERATION_NAMES = ['run_start', 'run_status', 'run_events', 'run_approval', 'run_stop'] as const;
export type OperationName = (typeof OPERATION_NAMES)[number];

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
}

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

export interface AipAction {
  id: string;
  capability_id: string;
  input: unknown;
  idempotency_key?: string;
  delegation_chain?: unknown[];
  [field: string]: unknown;
}

export type AipResultStatus = 'completed' | 'failed' | 'cancelled' | 'pending_approval' | 'requires_human';

export type ErrorCategory = 'temporary' | 'permanent' | 'auth' | 'policy' | 'economic' | 'connector' | 'transport';

export interface AipErrorDetails {
  endpoint_id?: string;
  operation?: string;
  uncertain_outcome: boolean;
  remote_status?: number;
  provider_code?: string;
  [field: string]: unknown;
}

export interface AipProtocolError {
  code: string;
  message: string;
  category: ErrorCategory;
  retryable: boolean;
  retry_after_ms?: number;
  details?: AipErrorDetails;
  source?: { component: string };
}

export type AipMessagePart = { type: 'text'; text: string } | { type: 'json'; data: unknown };

export interface AipReceipt {
  receipt_id: string;
  capability_id: string;
  endpoint_id: string;
  operation: OperationName;
  http_status?: number;
  idempotency_key?: string;
  started_at: string;
  completed_at: string;
  [field: string]: unknown;
}

export interface AipActionResult {
  action_id: string;
  status: AipResultStatus;
  output?: unknown;
  message?: AipMessagePart[];
  receipt?: AipReceipt;
  error?: AipProtocolError;
}

export type AipStreamChunkKind = 'data' | 'progress' | 'tool' | 'thought' | 'preview' | 'pending_approval' | 'error' | 'done';

export interface AipStreamChunk {
  action_id: string;
  sequence: number;
  kind: AipStreamChunkKind;
  data?: unknown;
  part?: AipMessagePart;
}

export interface HermesSseEvent {
  event: string;
  data: Record<string, unknown>;
  id?: string;
}

export interface RunEventsOutput {
  endpoint_id: string;
  operation: 'run_events';
  http_status: number;
  events: HermesSseEvent[];
  text: string;
  terminal: boolean;
  terminal_event?: string;
  truncated?: boolean;
  reconciliation?: { http_status: number | null; status?: Record<string, unknown>; error_code?: string };
}

export interface AipCapabilityBinding {
  profile: string;
  endpoint_id: string;
  operation: OperationName;
  method: 'GET' | 'POST';
  path: string;
  streaming: boolean;
}

export interface AipCapability {
  id: string;
  name: string;
  kind: 'workflow';
  description: string;
  input_schema: Record<string, unknown>;
  output_schema: Record<string, unknown>;
  risk: 'low' | 'medium' | 'high' | 'critical';
  stability: 'stable';
  auth: { scheme: 'bearer'; source: 'endpoint.api_key' };
  bindings: AipCapabilityBinding[];
  requires_human_approval: boolean;
  contract: Record<string, unknown>;
}

export interface AipManifest {
  manifest_version: string;
  agent: { id: string; kind: 'agent'; display_name: string };
  profiles: string[];
  capabilities: AipCapability[];
  security: Record<string, unknown>;
  limits: Record<string, unknown>;
  compatibility: Record<string, unknown>;
}

export interface ImplementationSupport {
  invocation: boolean;
  cancellation: boolean;
  streaming: boolean;
  retry: boolean;
  transaction: boolean;
  reconciliation: boolean;
  compensation: boolean;
  approval: boolean;
  credentials: boolean;
}

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
  close(): Promise<void>;
}
