import type { HermesSseEvent } from '../contract/aip.js';
import { TERMINAL_EVENTS } from '../contract/hermes-vocabulary.js';
import type { WebhookEvents } from '../types.js';
import type { OutboxEvent } from './types.js';

/** The events `lifecycle` webhooks receive: approval requests and answers, and every event that ends a run. */
export const LIFECYCLE_EVENTS: ReadonlySet<string> = new Set(['approval.request', 'approval.responded', ...TERMINAL_EVENTS]);

/** Whether a webhook with this `events` choice wants the event. */
export function webhookAccepts(events: WebhookEvents, event: HermesSseEvent): boolean {
  return events === 'all' || LIFECYCLE_EVENTS.has(event.event);
}

/**
 * The message body, in Standard Webhooks' recommended shape: `type` is `hermes.` and Hermes' event
 * name (`hermes.run.completed`), `timestamp` when the event occurred (Hermes' own `timestamp`, else
 * `sentAt`), `data` which run of which tenant and endpoint it belongs to and the event as journaled.
 */
export function webhookPayload(outboxEvent: OutboxEvent, sentAt: number): string {
  const { key, sequence, event } = outboxEvent;
  return JSON.stringify({
    type: `hermes.${event.event}`,
    timestamp: new Date(occurredAt(event) ?? sentAt).toISOString(),
    data: { tenant_id: key.tenant_id, endpoint_id: key.endpoint_id, run_id: key.run_id, sequence, event },
  });
}

/** Hermes stamps every event with `timestamp`, float epoch seconds; anything else is no time at all. */
function occurredAt(event: HermesSseEvent): number | undefined {
  const seconds = event.data['timestamp'];
  if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds <= 0) return undefined;
  const ms = Math.round(seconds * 1000);
  return ms <= MAX_DATE_MS ? ms : undefined;
}

/** The largest epoch ms a JavaScript Date holds. */
const MAX_DATE_MS = 8.64e15;
