/**
 * Stream chunks of a streaming action, POSTed one by one as signed `stream_chunk` envelopes to the
 * runtime's callback ingress, in order, each awaited before the connector reads on (back-pressure).
 * The envelope is the reference `ConnectorHostCallbackDispatcher`'s: `to` = the callback's
 * `connector_callback_recipient`, `security` = `{connector_callback: <the route>}` (never the
 * approval record), signed by the host key. Like the reference `post_secure_callback`, only a
 * 2xx answer counts and redirects are not followed; a timed-out, refused-for-now (408, 425, 429, 5xx) or
 * unreachable delivery is retried with the same bytes a bounded number of times. A chunk that
 * cannot be delivered ends delivery for the action (a later chunk would leave a gap in the
 * sequence), and the final result says so: it is never lost for it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { type Dispatcher, request } from 'undici';
import type { AipStreamChunk } from '../types.js';
import { transportReason } from './outbound.js';
import { type Envelope, type Principal, signedText } from './wire/envelope.js';
import { messageId } from './wire/ids.js';
import type { SigningKey } from './wire/keys.js';
import { rfc3339 } from './wire/time.js';

/** The reference `GatewayCallbackPolicy` default: one delivery attempt may take 5 s. */
export const CALLBACK_ATTEMPT_TIMEOUT_MS = 5_000;
/** One delivery and two retries, spaced 50 ms · 2^n as the reference's native client spaces its retries. */
export const CALLBACK_ATTEMPTS = 3;
const RETRY_BASE_MS = 50;

export interface CallbackSink {
  target: string;
  key: SigningKey;
  /** The host principal (id, kind, trust_domain); signing adds the did. */
  signer: Principal;
  now: () => number;
  attemptTimeoutMs?: number;
  /** The host's outbound client (its TLS roots); the process-wide default when absent. */
  dispatcher?: Dispatcher;
}

/** What one streaming action's callback delivery came to. */
export interface DeliveryReport {
  delivered: number;
  /** The sequence of the first chunk not delivered, when delivery stopped. */
  firstUndelivered?: number;
  /** Why that chunk could not be delivered (status, or the transport error's code or name; never a body). */
  reason?: string;
  undelivered: number;
}

/** Delivers the chunks of one action; `deliver` is the connector's `onChunk`. */
export class ChunkDelivery {
  readonly #sink: CallbackSink;
  readonly #route: unknown;
  readonly #recipient: Principal;
  readonly #correlation: Pick<Envelope, 'session_id' | 'correlation_id'>;
  readonly #signal: AbortSignal | undefined;
  readonly #report: DeliveryReport = { delivered: 0, undelivered: 0 };

  constructor(
    sink: CallbackSink,
    callback: { route: unknown; recipient: Principal },
    correlation: Pick<Envelope, 'session_id' | 'correlation_id'>,
    signal?: AbortSignal,
  ) {
    this.#sink = sink;
    this.#route = callback.route;
    this.#recipient = callback.recipient;
    this.#correlation = correlation;
    this.#signal = signal;
  }

  get report(): DeliveryReport {
    return { ...this.#report };
  }

  readonly deliver = async (chunk: AipStreamChunk): Promise<void> => {
    if (this.#report.firstUndelivered !== undefined) {
      this.#report.undelivered++;
      return;
    }
    const text = this.#envelope(chunk);
    const failure = text === undefined ? 'the chunk has no form the reference types accept' : await this.#post(text);
    if (failure === undefined) {
      this.#report.delivered++;
      return;
    }
    Object.assign(this.#report, { firstUndelivered: chunk.sequence, reason: failure });
    this.#report.undelivered++;
  };

  /** The signed envelope's text; undefined when the chunk cannot be signed (a value with no serde form). */
  #envelope(chunk: AipStreamChunk): string | undefined {
    const envelope: Envelope = {
      aip_version: '1.0',
      message_type: 'aip.core.v1.stream_chunk',
      message_id: messageId(),
      sent_at: rfc3339(this.#sink.now()),
      body: { stream_chunk: streamChunk(chunk) },
      ...this.#correlation,
      to: this.#recipient,
      security: { connector_callback: this.#route },
    };
    try {
      return signedText(envelope, this.#sink.key, this.#sink.signer);
    } catch {
      return undefined;
    }
  }

  /** Undefined once the runtime accepted the bytes; else why the last attempt failed. */
  async #post(text: string): Promise<string | undefined> {
    let failure = 'not attempted';
    for (let attempt = 0; attempt < CALLBACK_ATTEMPTS; attempt++) {
      if (this.#signal?.aborted) return 'the action was cancelled';
      if (attempt > 0) await sleep(RETRY_BASE_MS * 2 ** (attempt - 1), undefined, { signal: this.#signal }).catch(() => undefined);
      const outcome = await this.#attempt(text);
      if (outcome.ok) return undefined;
      failure = outcome.reason;
      if (!outcome.retryable) break;
    }
    return failure;
  }

  async #attempt(text: string): Promise<{ ok: true } | { ok: false; retryable: boolean; reason: string }> {
    const timeout = AbortSignal.timeout(this.#sink.attemptTimeoutMs ?? CALLBACK_ATTEMPT_TIMEOUT_MS);
    try {
      const response = await request(this.#sink.target, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: text,
        signal: this.#signal ? AbortSignal.any([this.#signal, timeout]) : timeout,
        ...(this.#sink.dispatcher === undefined ? {} : { dispatcher: this.#sink.dispatcher }),
      });
      await response.body.dump();
      if (response.statusCode >= 200 && response.statusCode < 300) return { ok: true };
      return { ok: false, retryable: temporaryStatus(response.statusCode), reason: `status ${response.statusCode}` };
    } catch (error) {
      return { ok: false, retryable: true, reason: transportReason(error) };
    }
  }
}

/** `post_secure_callback`'s classes: a client error is permanent except 408, 425 and 429; anything else may pass. */
function temporaryStatus(status: number): boolean {
  return status >= 500 || status === 408 || status === 425 || status === 429;
}

/** `StreamChunk` of the reference, in its field order. */
function streamChunk(chunk: AipStreamChunk): Record<string, unknown> {
  const wire: Record<string, unknown> = { action_id: chunk.action_id, sequence: chunk.sequence, kind: chunk.kind };
  if (chunk.data !== undefined) wire.data = chunk.data;
  if (chunk.part !== undefined) wire.part = chunk.part;
  return wire;
}
