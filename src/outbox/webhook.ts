/**
 * Standard Webhooks delivery targets: one per configured webhook, each POSTing one journaled event per
 * message, signed with the webhook's secret by the `standardwebhooks` package (the reference
 * implementation). Outcomes follow the specification's status handling; see docs/webhooks.md.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import { Webhook } from 'standardwebhooks';
import type { Dispatcher, Pool } from 'undici';
import type { ResolvedWebhook } from '../config.js';
import type { HermesSseEvent } from '../contract/aip.js';
import { parseRetryAfter } from '../failures.js';
import { connectorLogger } from '../internal/logger.js';
import { USER_AGENT } from '../internal/package-info.js';
import { CallScope, OpenCalls } from '../transport/call-scope.js';
import { createOriginPool, isSuccess, transportErrorCode } from '../transport/http.js';
import type { DeliveryOutcome, DeliveryTarget, OutboxEvent } from './types.js';
import { webhookAccepts, webhookPayload } from './webhook-payload.js';

export interface WebhookTargetOptions {
  /** Used for every webhook instead of a keep-alive pool per webhook (the connector's `dispatcher` option). */
  dispatcher?: Dispatcher;
  logger?: Logger;
  /** Clock in epoch ms: the `webhook-timestamp` of each attempt (tests). */
  now?: () => number;
}

export interface WebhookTargets {
  readonly targets: readonly DeliveryTarget[];
  /** Aborts the attempts in flight (they end as `retry`) and closes the pools the targets made. */
  close(): Promise<void>;
}

/** A `Retry-After` longer than this is cut to it: a receiver cannot park a delivery for days. */
export const MAX_WEBHOOK_RETRY_AFTER_MS = 3_600_000;
/** What is read of an answer's body before the connection is let go (the body itself is ignored). */
const DISCARDED_BODY_LIMIT = 64 * 1024;
/** A Standard Webhooks `webhook-id` is signed as `id.timestamp.body`, so it must not contain a `.`. */
const WEBHOOK_ID = /^[A-Za-z0-9_:-]{1,256}$/;
const DELIVERED: DeliveryOutcome = Object.freeze({ kind: 'delivered' });

/** The delivery targets of the resolved `webhooks` option, and what closes them. */
export function createWebhookTargets(webhooks: readonly ResolvedWebhook[], options: WebhookTargetOptions = {}): WebhookTargets {
  const openCalls = new OpenCalls();
  const pools: Pool[] = [];
  const logger = connectorLogger(options.logger);
  const now = options.now ?? Date.now;
  const targets = webhooks.map((webhook) => {
    let dispatcher = options.dispatcher;
    if (dispatcher === undefined) {
      const pool = createOriginPool(webhook.origin);
      pools.push(pool);
      dispatcher = pool;
    }
    return new WebhookTarget(webhook, { dispatcher, openCalls, logger, now });
  });
  return {
    targets,
    async close() {
      openCalls.close();
      await Promise.all(pools.map((pool) => pool.destroy()));
    },
  };
}

interface TargetParts {
  dispatcher: Dispatcher;
  openCalls: OpenCalls;
  logger: Logger;
  now: () => number;
}

class WebhookTarget implements DeliveryTarget {
  readonly id: string;
  readonly maxBatch = 1;
  readonly #webhook: ResolvedWebhook;
  readonly #signer: Webhook;
  /** Path and query: private, since either may carry a token. */
  readonly #path: string;
  readonly #parts: TargetParts;

  constructor(webhook: ResolvedWebhook, parts: TargetParts) {
    this.id = webhook.id;
    this.#webhook = webhook;
    this.#signer = new Webhook(webhook.secret.reveal());
    const url = new URL(webhook.url.reveal());
    this.#path = `${url.pathname}${url.search}`;
    this.#parts = parts;
  }

  accepts(event: HermesSseEvent): boolean {
    return webhookAccepts(this.#webhook.events, event);
  }

  async deliver(events: readonly OutboxEvent[], signal: AbortSignal): Promise<DeliveryOutcome> {
    const [event] = events;
    if (event === undefined) return DELIVERED;
    const outcome =
      events.length > 1
        ? refused(`a webhook takes one event per message, not ${events.length}`)
        : WEBHOOK_ID.test(event.id)
          ? await this.#attempt(event, signal)
          : refused('the event id is not a webhook-id (1 to 256 characters of A-Z a-z 0-9 _ : -)');
    this.#parts.logger.debug(
      { target: this.id, origin: this.#webhook.origin, run_id: event.key.run_id, sequence: event.sequence, outcome },
      'webhook delivery attempt',
    );
    return outcome;
  }

  async #attempt(event: OutboxEvent, signal: AbortSignal): Promise<DeliveryOutcome> {
    const { dispatcher, openCalls, now } = this.#parts;
    const { origin, timeoutMs } = this.#webhook;
    const sentAt = now();
    const body = webhookPayload(event, sentAt);
    const headers = {
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
      'webhook-id': event.id,
      'webhook-timestamp': String(Math.floor(sentAt / 1000)),
      'webhook-signature': this.#signer.sign(event.id, new Date(sentAt), body),
    };
    const scope = new CallScope({ signal, openCalls, deadline: undefined, timeoutMs, now });
    try {
      const pending = dispatcher.request({
        origin,
        path: this.#path,
        method: 'POST',
        headers,
        body,
        signal: scope.signal,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      const response = await scope.race(pending, (late) => late.body.destroy());
      // An abort while the body is read surfaces as an 'error' on it; never let it go unhandled.
      response.body.on('error', ignore);
      const outcome = outcomeOfAnswer(response.statusCode, response.headers, now());
      await discardBody(response, scope);
      return outcome;
    } catch (error) {
      return failedAttempt(error, scope, timeoutMs);
    } finally {
      scope.dispose();
    }
  }
}

/**
 * Standard Webhooks' status handling: 2xx is success; 410 Gone means the receiver wants no more
 * (refused: retrying cannot help); any other status, 3xx (never followed), 4xx and 5xx alike, is a
 * failure tried again with back-off, after `Retry-After` when the receiver sent one.
 */
export function outcomeOfAnswer(status: number, headers: IncomingHttpHeaders, now: number): DeliveryOutcome {
  if (isSuccess(status)) return DELIVERED;
  if (status === 410) return refused('the receiver answered 410 Gone: it wants no more deliveries');
  const afterMs = parseRetryAfter(headers['retry-after'], now);
  const reason = `the receiver answered HTTP ${status}`;
  return afterMs === undefined ? { kind: 'retry', reason } : { kind: 'retry', reason, afterMs: Math.min(afterMs, MAX_WEBHOOK_RETRY_AFTER_MS) };
}

/** Reads and drops a bounded part of the body, so the connection is reused or closed, never pinned. */
async function discardBody(response: Dispatcher.ResponseData, scope: CallScope): Promise<void> {
  try {
    await scope.race(response.body.dump({ limit: DISCARDED_BODY_LIMIT }));
  } catch {
    response.body.destroy();
  }
}

function failedAttempt(error: unknown, scope: CallScope, timeoutMs: number): DeliveryOutcome {
  switch (scope.cause) {
    case 'timeout':
      return { kind: 'retry', reason: `the receiver did not answer within ${timeoutMs} ms` };
    case 'cancelled':
    case 'closed':
      return { kind: 'retry', reason: 'the attempt was aborted: the connector is closing' };
    default: {
      const code = transportErrorCode(error);
      return { kind: 'retry', reason: `the connection failed${code ? ` (${code})` : ''}` };
    }
  }
}

function refused(reason: string): DeliveryOutcome {
  return { kind: 'refused', reason };
}

function ignore(): void {}
