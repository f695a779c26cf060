import { Pool, type Dispatcher } from 'undici';
import type { Secret } from '../internal/secret.js';
import { USER_AGENT } from '../internal/package-info.js';

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
const MAX_BODY = 1024 * 1024;
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT']);

/** The Herm session-events route, with `x-api-key` auth. */
export class HermClient {
  readonly #origin: string;
  readonly #apiKey: Secret;
  readonly #dispatcher: Dispatcher;
  readonly #owned: Pool | undefined;

  constructor(origin: string, apiKey: Secret, dispatcher: Dispatcher | undefined) {
    this.#origin = origin;
    this.#apiKey = apiKey;
    this.#owned = dispatcher ? undefined : new Pool(origin, { connect: { timeout: 10_000 } });
    this.#dispatcher = dispatcher ?? (this.#owned as Pool);
  }

  get dispatcher(): Dispatcher {
    return this.#dispatcher;
  }

  headers(accept: string): Record<string, string> {
    return { 'x-api-key': this.#apiKey.reveal(), 'user-agent': USER_AGENT, accept };
  }

  async postResult(sessionId: string, event: ToolResultEvent, signal: AbortSignal): Promise<PostOutcome> {
    let response: Dispatcher.ResponseData;
    try {
      response = await this.#dispatcher.request({
        origin: this.#origin,
        path: `/v1/sessions/${encodeURIComponent(sessionId)}/events`,
        method: 'POST',
        headers: { ...this.headers('application/json'), 'content-type': 'application/json' },
        body: JSON.stringify({ events: [event] }),
        signal: AbortSignal.any([signal, AbortSignal.timeout(POST_TIMEOUT_MS)]),
      });
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      const reason = typeof code === 'string' ? code : 'transport';
      return typeof code === 'string' && NOT_SENT.has(code) ? { kind: 'retryable', reason } : { kind: 'unknown', reason };
    }
    const body = await readJson(response);
    const status = response.statusCode;
    if (status >= 200 && status < 300) {
      const accepted = (body as { events?: unknown } | undefined)?.events;
      const first = Array.isArray(accepted) ? (accepted[0] as Record<string, unknown> | undefined) : undefined;
      return { kind: 'accepted', event: first ?? {} };
    }
    const error = (body as { error?: { type?: unknown; retryable?: unknown } } | undefined)?.error;
    if (status === 410 && error?.type === 'response_expired') return { kind: 'expired' };
    if (status === 429) return { kind: 'retryable', reason: 'HTTP 429' };
    if (status >= 500) return { kind: 'unknown', reason: `HTTP ${status}` };
    return { kind: 'rejected', status };
  }

  async close(): Promise<void> {
    await this.#owned?.close();
  }
}

async function readJson(response: Dispatcher.ResponseData): Promise<unknown> {
  try {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of response.body as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_BODY) {
        response.body.destroy();
        return undefined;
      }
      chunks.push(chunk);
    }
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    return undefined;
  }
}
