import type { HermesSseEvent } from '../contract/aip.js';
import type { JournalKey } from '../journal/types.js';

/**
 * One journaled event as a delivery target receives it. `id` is stable for (target, tenant, endpoint,
 * run, sequence): every attempt, by any replica, sends the same id, so receivers deduplicate by it.
 * A webhook sends it as `webhook-id`, which Standard Webhooks signs as `id.timestamp.body`: it must be 1 to
 * 256 characters of `A-Z a-z 0-9 _ : -` (no `.`), or the webhook refuses the event.
 */
export interface OutboxEvent {
  readonly id: string;
  readonly key: JournalKey;
  /** The journal's sequence of the event (1, 2, …): events of one run reach a target in this order. */
  readonly sequence: number;
  readonly event: HermesSseEvent;
}

/**
 * What one delivery attempt came to.
 * - delivered: the target took every event of the batch.
 * - retry: a temporary failure (down, slow, 5xx, 429, garbage, back-pressure); tried again with back-off,
 *   not before `afterMs` when given (the target asked for a pause), until the delivery's bounded age.
 * - refused: retrying cannot help (the target said the events are invalid, or it is gone): the
 *   delivery is given up now, with `reason` as its evidence.
 */
export type DeliveryOutcome =
  | { readonly kind: 'delivered' }
  | { readonly kind: 'retry'; readonly reason: string; readonly afterMs?: number }
  | { readonly kind: 'refused'; readonly reason: string };

/**
 * Somewhere the connector delivers run events to from the durable outbox: a Standard Webhooks
 * endpoint, or the AIP runtime's connector-event ingress.
 */
export interface DeliveryTarget {
  /**
   * Names the target in the outbox, stable across restarts and identical on every replica configured
   * with it (a replica delivers, and takes over, only deliveries of targets it has). Never a secret.
   */
  readonly id: string;
  /** Most events one `deliver` call takes (1 for a webhook: one message per webhook-id). */
  readonly maxBatch: number;
  /** Whether the target wants this event; the others are passed over (and count as delivered). */
  accepts(event: HermesSseEvent): boolean;
  /**
   * Delivers consecutive accepted events of one run, in order. Never rejects: every failure is an
   * outcome. Ends promptly when `signal` aborts (the connector is closing), with a `retry`.
   */
  deliver(events: readonly OutboxEvent[], signal: AbortSignal): Promise<DeliveryOutcome>;
}
