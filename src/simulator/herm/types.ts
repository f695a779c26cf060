export interface HermSimulatorOptions {
  /** Required; every request needs `x-api-key: <apiKey>`. */
  apiKey: string;
  /** Default '127.0.0.1'. */
  host?: string;
  /** Default 0 (an ephemeral port). */
  port?: number;
  /** How long a pending custom tool call waits for an immediate or running result. Default 300000 (five minutes). */
  pendingTimeoutMs?: number;
  /** Interval of the `: ping` comment on session streams. Default 15000. */
  keepaliveMs?: number;
}

export type HermToolCallState = 'pending' | 'running' | 'completed' | 'failed' | 'expired';

export interface HermToolCallView {
  session_id: string;
  tool_use_id: string;
  state: HermToolCallState;
  running_event_id?: string;
  final_event_id?: string;
}

export interface HermRecordedRequest {
  method: string;
  /** The request target as received (path plus any query string). */
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** The body as UTF-8 text; filled in once it has been received ('' until then). */
  body: string;
}

export interface HermCustomToolUse {
  type: 'agent.custom_tool_use';
  id: string;
  tool_use_id: string;
  name: string;
  input: Record<string, unknown>;
}

export interface HermToolCallRequest {
  name: string;
  input: Record<string, unknown>;
  tool_use_id?: string;
}

/**
 * Applies to the next POST `/v1/sessions/{id}/events` requests that pass authentication.
 * Give exactly one of `status` or `drop`.
 */
export interface HermFault {
  /** How many requests the fault applies to. Default 1. */
  times?: number;
  /** Answer this status without processing the request (the body is read first). */
  status?: number;
  /** Body of the `status` answer; default `{"error":{"type":"api_error","message":"simulated fault","retryable":true}}`. */
  body?: string;
  /**
   * `before-processing`: destroy the socket without processing the request.
   * `after-processing`: process the request (the events ARE accepted), then destroy the socket
   * instead of answering (a dropped response).
   */
  drop?: 'before-processing' | 'after-processing';
}

export interface HermSimulator {
  /** 'http://127.0.0.1:<port>' (no trailing slash). */
  readonly url: string;
  /** Every request received, in order (including rejected ones). */
  readonly requests: HermRecordedRequest[];
  /**
   * Creates a pending custom tool call (as if the agent emitted `agent.custom_tool_use`), sends the
   * event to the session's streams and returns it. Emitting a `tool_use_id` the session already has
   * redelivers the original event (same id) without touching the call's state.
   */
  emitToolUse(sessionId: string, call: HermToolCallRequest): HermCustomToolUse;
  /**
   * Makes the pending call expire now (the session stopped waiting): later immediate or running
   * results get 410. An unknown `tool_use_id` is recorded as expired; a call that is no longer
   * pending is left alone.
   */
  expire(sessionId: string, toolUseId: string): void;
  /** The session's event history: accepted results, with a running result replaced in place by its completion. */
  history(sessionId: string): Array<Record<string, unknown>>;
  /** Every accepted `user.custom_tool_result`, in order of acceptance (including replaced ones). */
  accepted(sessionId?: string): Array<Record<string, unknown>>;
  toolCall(sessionId: string, toolUseId: string): HermToolCallView | undefined;
  /** Number of final results that started a new agent turn, per (session, tool_use_id): must stay ≤ 1. */
  continuations(sessionId: string, toolUseId: string): number;
  /** Number of open `GET …/stream` subscribers of a session (lets a test wait for a bridge to subscribe). */
  subscribers(sessionId: string): number;
  injectFault(fault: HermFault): void;
  /** Ends every stream, cancels every timer and destroys every connection. Idempotent. */
  close(): Promise<void>;
}
