import type { Dispatcher, Pool } from 'undici';
import type { HermesFailure } from '../failures.js';
import { USER_AGENT } from '../internal/package-info.js';
import type { Secret } from '../internal/secret.js';
import { CallScope, OpenCalls } from '../transport/call-scope.js';
import { exchange } from '../transport/http-exchange.js';
import { createOriginPool, sendRequest, type BufferedResponse, type ProviderResponse, type RequestTarget, type BodyLimit } from '../transport/http.js';

/** A `user.custom_tool_result` as the bridge posts it. */
export interface ToolResultEvent {
  type: 'user.custom_tool_result';
  tool_use_id: string;
  content: Array<{ type: 'text'; text: string }>;
  status: 'running' | 'completed' | 'failed';
  is_error: boolean;
}

/**
 * What one POST of a tool result came to. `retryable`: Herm certainly did not take it (429,
 * nothing sent). `unknown`: it may have (5xx, a dropped response): only idempotent final
 * results may be sent again.
 */
export type PostOutcome =
  | { kind: 'accepted'; event: Record<string, unknown> & { id?: string } }
  | { kind: 'expired' }
  | { kind: 'retryable'; reason: string }
  | { kind: 'unknown'; reason: string }
  | { kind: 'rejected'; status: number };

const POST_TIMEOUT_MS = 30_000;
/** A session stream may be quiet between tool calls: undici's own 300 s for headers and between body bytes. */
const STREAM_TIMEOUT_MS = 300_000;
const MAX_BODY = 1024 * 1024;

/**
 * The Herm session-events route, with `x-api-key` auth, over the connector's transport: the same
 * pool settings, bounded reads, abort handling and "certainly not sent" classification.
 */
export class HermClient {
  readonly #target: RequestTarget;
  readonly #apiKey: Secret;
  readonly #owned: Pool | undefined;
  readonly #openCalls = new OpenCalls();

  constructor(origin: string, apiKey: Secret, dispatcher: Dispatcher | undefined) {
    this.#apiKey = apiKey;
    this.#owned = dispatcher ? undefined : createOriginPool(origin);
    this.#target = { dispatcher: dispatcher ?? (this.#owned as Pool), origin, peer: 'the Herm session API' };
  }

  /** Opens a streamed GET (the session's event stream); transport trouble throws HermesFailure. */
  async openStream(path: string, signal: AbortSignal): Promise<{ response: ProviderResponse; scope: CallScope }> {
    const scope = this.#scope(signal, undefined);
    try {
      const response = await sendRequest(
        this.#target,
        { method: 'GET', path, headers: this.#headers('text/event-stream'), headersTimeoutMs: STREAM_TIMEOUT_MS, bodyTimeoutMs: STREAM_TIMEOUT_MS },
        scope,
      );
      return { response, scope };
    } catch (error) {
      scope.dispose();
      throw error;
    }
  }

  async postResult(sessionId: string, event: ToolResultEvent, signal: AbortSignal): Promise<PostOutcome> {
    const scope = this.#scope(signal, POST_TIMEOUT_MS);
    let answer: BufferedResponse;
    try {
      answer = await exchange(
        this.#target,
        {
          method: 'POST',
          path: `/v1/sessions/${encodeURIComponent(sessionId)}/events`,
          headers: { ...this.#headers('application/json'), 'content-type': 'application/json' },
          body: JSON.stringify({ events: [event] }),
          headersTimeoutMs: POST_TIMEOUT_MS,
          bodyTimeoutMs: POST_TIMEOUT_MS,
        },
        scope,
        ANY_BODY_UP_TO_LIMIT,
      );
    } catch (error) {
      const failure = error as HermesFailure;
      const reason = transportReason(failure);
      // Certainly not sent (refused connection, unreachable host, aborted before it started): Herm did not take it.
      return failure.effect === 'none' ? { kind: 'retryable', reason } : { kind: 'unknown', reason };
    } finally {
      scope.dispose();
    }
    return outcomeOf(answer.statusCode, jsonOf(answer.body));
  }

  async close(): Promise<void> {
    this.#openCalls.close();
    await this.#owned?.close();
  }

  #scope(signal: AbortSignal, timeoutMs: number | undefined): CallScope {
    return new CallScope({ signal, openCalls: this.#openCalls, deadline: undefined, timeoutMs, now: Date.now });
  }

  #headers(accept: string): Record<string, string> {
    return { 'x-api-key': this.#apiKey.reveal(), 'user-agent': USER_AGENT, accept };
  }
}

const ANY_BODY_UP_TO_LIMIT: BodyLimit = () => MAX_BODY;

function outcomeOf(status: number, body: unknown): PostOutcome {
  if (status >= 200 && status < 300) {
    const accepted = (body as { events?: unknown } | undefined)?.events;
    const first = Array.isArray(accepted) ? (accepted[0] as Record<string, unknown> | undefined) : undefined;
    return { kind: 'accepted', event: first ?? {} };
  }
  const error = (body as { error?: { type?: unknown } } | undefined)?.error;
  if (status === 410 && error?.type === 'response_expired') return { kind: 'expired' };
  if (status === 429) return { kind: 'retryable', reason: 'HTTP 429' };
  if (status >= 500) return { kind: 'unknown', reason: `HTTP ${status}` };
  return { kind: 'rejected', status };
}

/** A body that is not JSON (or was over the limit) counts as no body. */
function jsonOf(body: Buffer | undefined): unknown {
  if (body === undefined) return undefined;
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
}

/** The transport's code for the failure, else its kind: what a log line and a retry decision may name. */
function transportReason(failure: HermesFailure): string {
  const code = failure.details?.transport_code;
  if (typeof code === 'string') return code;
  return failure.details?.timeout === true ? 'timeout' : failure.code;
}
