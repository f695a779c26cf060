/**
 * Journaled Hermes run events as AIP `Event`s (aip-core `Event`: id, kind, occurred_at, data) for the
 * runtime's connector-event ingress (§1.7), cut into envelopes its limits accept. Everything here is a
 * function of the outbox event alone, so every replay of an event (any attempt, any replica) carries
 * the same content, which is what the ingress's idempotent replay by event id compares.
 */
import { createHash } from 'node:crypto';
import type { OutboxEvent } from '../outbox/types.js';
import { type Principal, wellFormed } from './wire/envelope.js';
import { wireJson } from './wire/json.js';
import { rfc3339, rfc3339Micros } from './wire/time.js';

/** The ingress's limits (`ConnectorEventIngressLimits::default`). */
export const MAX_EVENTS_PER_ENVELOPE = 100;
export const MAX_ENVELOPE_BYTES = 4 * 1024 * 1024;
export const MAX_EVENT_BYTES = 256 * 1024;
const MAX_KIND_BYTES = 256;
/** How far ahead of the ingress's clock an event's occurred_at may be. */
const MAX_FUTURE_SKEW_MS = 5 * 60_000;
/** What an envelope's sent_at and a re-read float may add beyond the envelope we measured. */
const ENVELOPE_MARGIN_BYTES = 4 * 1024;
const KIND_PREFIX = 'hermes.';

/** `security.connector_event` (a `deny_unknown_fields` struct at the ingress), in its field order. */
export interface ConnectorEventRoute {
  readonly tenant_id: string;
  readonly instance_id: string;
  readonly replica_id: string;
  readonly version_id: string;
  readonly manifest_digest: string;
  readonly lease_sequence: number;
  readonly channel_id: string;
}

/** An AIP `Event` as this host sends it: no `actor` (the ingress stamps the signed sender). */
export interface AipEvent {
  readonly id: string;
  readonly kind: string;
  readonly occurred_at: string;
  readonly data: Record<string, unknown>;
}

/**
 * The AIP event of a journaled Hermes event. `data` holds the run's coordinates and the Hermes event as
 * it was read; when the event, as the ingress stores it, would pass 256 KiB the Hermes event's own
 * `data` is replaced by `data_truncated: {bytes, sha256}` of its JSON (the whole event stays readable
 * through run_events). Undefined when even that does not fit (an event name of ~256 KiB).
 */
export function aipEvent(outbox: OutboxEvent, nowMs: number, storedBytes: (event: AipEvent) => number): AipEvent | undefined {
  const { key, sequence } = outbox;
  // A lone surrogate has no UTF-8 form: read as a UTF-8 decoder would, so that the size measured is the size sent.
  const event = wellFormed(outbox.event) as OutboxEvent['event'];
  const hermes = event.id === undefined ? { event: event.event, data: event.data } : { event: event.event, id: event.id, data: event.data };
  const base = { id: eventId(outbox.id), kind: eventKind(event.event), occurred_at: occurredAt(event.data, nowMs) };
  const coordinates = { tenant_id: key.tenant_id, endpoint_id: key.endpoint_id, run_id: key.run_id, sequence };
  const whole: AipEvent = { ...base, data: { ...coordinates, hermes } };
  if (storedBytes(whole) <= MAX_EVENT_BYTES) return whole;
  const text = wireJson(event.data);
  const { data: _dropped, ...rest } = hermes;
  const truncated: AipEvent = {
    ...base,
    data: { ...coordinates, hermes: { ...rest, data_truncated: { bytes: Buffer.byteLength(text), sha256: createHash('sha256').update(text).digest('hex') } } },
  };
  return storedBytes(truncated) <= MAX_EVENT_BYTES ? truncated : undefined;
}

/**
 * The byte size of the event as the ingress measures it after enriching it (`validate_and_enrich_event`):
 * `actor` = the signed sender, `data.identity.tenant.id` and `data.aip_connector` stamped from the route.
 */
export function storedEventBytes(event: AipEvent, sender: Principal, route: ConnectorEventRoute): number {
  const { replica_id, version_id, channel_id, lease_sequence, instance_id } = route;
  const data = {
    ...event.data,
    identity: { tenant: { id: route.tenant_id } },
    aip_connector: { instance_id, replica_id, version_id, channel_id, lease_sequence },
  };
  return Buffer.byteLength(wireJson({ ...event, actor: sender, data }));
}

/**
 * Consecutive events cut into envelopes of at most 100 events whose text stays under 4 MiB, given the
 * byte size of an envelope holding no event (`emptyEnvelopeBytes`).
 */
export function envelopeBatches(events: readonly AipEvent[], emptyEnvelopeBytes: number): AipEvent[][] {
  const budget = MAX_ENVELOPE_BYTES - ENVELOPE_MARGIN_BYTES - emptyEnvelopeBytes;
  const batches: AipEvent[][] = [];
  let current: AipEvent[] = [];
  let used = 0;
  for (const event of events) {
    const size = Buffer.byteLength(wireJson(event)) + 1;
    if (current.length === MAX_EVENTS_PER_ENVELOPE || (current.length > 0 && used + size > budget)) {
      batches.push(current);
      current = [];
      used = 0;
    }
    current.push(event);
    used += size;
  }
  if (current.length > 0) batches.push(current);
  return batches;
}

/** `evt_` + 32 hex digits shaped as a UUIDv7 (the reference's typed-id form), derived from the outbox id so every replay keeps it. */
export function eventId(outboxId: string): string {
  const hex = createHash('sha256').update(outboxId).digest('hex');
  const variant = '89ab'.charAt(Number.parseInt(hex.charAt(16), 16) & 3);
  return `evt_${hex.slice(0, 12)}7${hex.slice(13, 16)}${variant}${hex.slice(17, 32)}`;
}

/** `hermes.` + the Hermes event name, cut to the ingress's 256 bytes on a character boundary. */
export function eventKind(name: string): string {
  let kind = KIND_PREFIX;
  for (const character of name) {
    if (Buffer.byteLength(kind) + Buffer.byteLength(character) > MAX_KIND_BYTES) break;
    kind += character;
  }
  return kind;
}

/**
 * When the Hermes event happened: its `timestamp` (float seconds since the epoch, to the microsecond); now
 * when it has none. A timestamp a little ahead of our clock is kept as it is, so that a resend builds the
 * same event (the ingress refuses a changed one as an idempotency conflict); only one beyond the ingress's
 * future skew (now + 5 min), which it would refuse anyway, becomes now.
 */
export function occurredAt(data: Record<string, unknown>, nowMs: number): string {
  const seconds = data['timestamp'];
  if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds < 0) return rfc3339(nowMs);
  const micros = Math.round(seconds * 1_000_000);
  return micros > (nowMs + MAX_FUTURE_SKEW_MS) * 1000 || !Number.isSafeInteger(micros) ? rfc3339(nowMs) : rfc3339Micros(micros);
}
