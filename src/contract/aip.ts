/** AIP wire objects as this connector speaks them (AIP's snake_case), and Hermes' run event shapes. */

/** The five Hermes run operations published for every endpoint. */
export const OPERATION_NAMES = ['run_start', 'run_status', 'run_events', 'run_approval', 'run_stop', 'run_steer'] as const;
export type OperationName = (typeof OPERATION_NAMES)[number];

/** Published for an endpoint only when its configuration opts in (`operations: { run_steer: true }`). */
export const OPTIONAL_OPERATIONS = ['run_steer'] as const satisfies readonly OperationName[];
export type OptionalOperation = (typeof OPTIONAL_OPERATIONS)[number];

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
  /** `write_failed`: the run ledger could not record this outcome when it was returned (it keeps trying; see the README's Run ledger). */
  ledger?: 'write_failed';
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

/** Events Hermes no longer kept when a read asked for them: its `seq` from `from_seq` to `to_seq` (null: Hermes did not say), after the result's first `after_events`. */
export interface EventsLostRange {
  from_seq: number;
  to_seq: number | null;
  after_events: number;
  reason: 'replay_truncated';
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
  /** How often a stream cut before its terminal event was reopened with `?last_seq=` (only when Hermes numbers its events). */
  resumed?: number;
  /** Why resuming stopped and the stream was reconciled instead: `not_found` (a 404 on resume) or `not_numbered` (the resumed stream sent an event without a number). */
  resume_fallback?: 'not_found' | 'not_numbered';
  /**
   * Events Hermes no longer kept when the read (or one of its resumptions) asked for them
   * (`replay.truncated`): Hermes' `seq` from `from_seq` to `to_seq` (null: Hermes did not say), missing
   * after the result's first `after_events` events. The kept events after them were read.
   */
  events_lost?: EventsLostRange[];
  reconciliation?: { http_status: number | null; status?: Record<string, unknown>; error_code?: string };
  /** Read from the run journal: its state, its last sequence, the gaps it recorded and why it closed. */
  journal?: {
    state: 'following' | 'complete' | 'reconciled' | 'truncated' | 'abandoned';
    last_sequence: number;
    events_lost?: Array<{ after_sequence: number; reason: string }>;
    close_reason?: string;
  };
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
