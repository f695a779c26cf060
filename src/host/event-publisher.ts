/**
 * The AIP runtime as a delivery target of the outbox: journaled Hermes run events POSTed as signed
 * `event_stream` envelopes to the runtime's `/aip/v1/connector-events` (§1.7), as the reference
 * `ConnectorHostEventPublisher` sends them: `to` the gateway principal, `security.connector_event` =
 * the host's coordinates with the current lease sequence and the channel the manifest declares, signed
 * by the host key, only while the host holds a valid lease (else `retry`). A batch the ingress limits
 * cannot take in one envelope goes as several, in order; a replay of any of them is idempotent there
 * (same event ids, same content). The answer decides the outcome: a gateway-signed `event_stream` is
 * `delivered`; `connector_event.capacity` / `.unavailable` / `.not_authorized`, 5xx, transport errors and
 * anything unsigned or unreadable are `retry`; a gateway-signed `connector_event.invalid` or
 * `.idempotency_conflict` is `refused`.
 */
import { type Dispatcher, request } from 'undici';
import type { DeliveryOutcome, DeliveryTarget, OutboxEvent } from '../outbox/types.js';
import { CALLBACK_ATTEMPT_TIMEOUT_MS } from './callbacks.js';
import { boundedText, transportReason } from './outbound.js';
import { type AipEvent, aipEvent, type ConnectorEventRoute, envelopeBatches, MAX_ENVELOPE_BYTES, storedEventBytes } from './provider-events.js';
import { type Envelope, type Principal, signedText, verifyEnvelopeText } from './wire/envelope.js';
import { messageId } from './wire/ids.js';
import { parseWire } from './wire/json.js';
import type { SigningKey } from './wire/keys.js';
import { rfc3339 } from './wire/time.js';

/** The channel the host's manifest declares for its provider events. */
export const RUN_EVENTS_CHANNEL_ID = 'hermes.run_events';
/** `manifest.channels` entry of that channel (the ingress accepts a channel named by an object's `id`). */
export const RUN_EVENTS_CHANNEL = {
  id: RUN_EVENTS_CHANNEL_ID,
  kind: 'event_stream',
  description: 'Hermes run events of the runs this connector started, as signed event_stream envelopes to /aip/v1/connector-events',
} as const;

/** Waits the ingress asks for, when its answer names none: capacity 100 ms, unavailable 1 s (the reference's `retry_after_ms`). */
const CAPACITY_RETRY_MS = 100;
const UNAVAILABLE_RETRY_MS = 1_000;
/** Without a lease there is nothing to send with: the next try after about one lease recovery attempt. */
const NO_LEASE_RETRY_MS = 1_000;
const MAX_RETRY_AFTER_MS = 60_000;

/** What an envelope is signed, routed and sent with at this moment. */
export interface Publishing {
  /** The host principal (id, kind, trust_domain); signing adds the DID. */
  readonly signer: Principal;
  /** The gateway principal (`to`), and the DID its answers are signed with. */
  readonly recipient: Principal;
  readonly recipientDid: string;
  readonly route: ConnectorEventRoute;
  /** The host's outbound client (its TLS roots); undici's global one when absent. */
  readonly dispatcher?: Dispatcher;
}

export interface AipEventTargetOptions {
  /** The runtime's `…/aip/v1/connector-events`. */
  readonly endpoint: string;
  /** Names the target (`aip:<instance id>`): the same on every replica of the instance. */
  readonly instanceId: string;
  readonly key: SigningKey;
  /** What to publish with now; undefined while the host may not publish (no valid lease, draining, not ready). */
  readonly publishing: () => Publishing | undefined;
  readonly now?: () => number;
  readonly attemptTimeoutMs?: number;
}

export function createAipEventTarget(options: AipEventTargetOptions): DeliveryTarget {
  return {
    id: `aip:${options.instanceId}`,
    maxBatch: 100,
    accepts: () => true,
    deliver: (events, signal) => deliverEvents(options, events, signal),
  };
}

async function deliverEvents(options: AipEventTargetOptions, events: readonly OutboxEvent[], signal: AbortSignal): Promise<DeliveryOutcome> {
  const state = options.publishing();
  if (state === undefined) return { kind: 'retry', reason: 'no valid control-plane lease to publish under', afterMs: NO_LEASE_RETRY_MS };
  const nowMs = (options.now ?? Date.now)();
  const sender: Principal = { ...state.signer, did: options.key.did };
  const built: AipEvent[] = [];
  for (const outbox of events) {
    const event = aipEvent(outbox, nowMs, (candidate) => storedEventBytes(candidate, sender, state.route));
    if (event === undefined) return { kind: 'refused', reason: `event ${outbox.sequence} of run ${outbox.key.run_id} exceeds 256 KiB even without its data` };
    built.push(event);
  }
  const envelope = (batch: AipEvent[]) => signedText(eventEnvelope(batch, state, nowMs), options.key, state.signer);
  for (const batch of envelopeBatches(built, Buffer.byteLength(envelope([])))) {
    if (signal.aborted) return { kind: 'retry', reason: 'the connector is closing' };
    const outcome = await post(options.endpoint, envelope(batch), state, signal, options.attemptTimeoutMs);
    if (outcome.kind !== 'delivered') return outcome;
  }
  return { kind: 'delivered' };
}

function eventEnvelope(events: AipEvent[], state: Publishing, nowMs: number): Envelope {
  return {
    aip_version: '1.0',
    message_type: 'aip.discovery.v1.event_stream_response',
    message_id: messageId(),
    sent_at: rfc3339(nowMs),
    body: { event_stream: { events } },
    to: state.recipient,
    security: { connector_event: state.route },
  };
}

async function post(endpoint: string, text: string, state: Publishing, signal: AbortSignal, timeoutMs = CALLBACK_ATTEMPT_TIMEOUT_MS): Promise<DeliveryOutcome> {
  const timeout = AbortSignal.timeout(timeoutMs);
  try {
    const response = await request(endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: text,
      signal: AbortSignal.any([signal, timeout]),
      ...(state.dispatcher === undefined ? {} : { dispatcher: state.dispatcher }),
    });
    const answer = await boundedText(response, MAX_ENVELOPE_BYTES);
    return outcomeOf(response.statusCode, answer, state.recipientDid);
  } catch (error) {
    return { kind: 'retry', reason: signal.aborted ? 'the connector is closing' : transportReason(error) };
  }
}

/** The outcome an ingress answer means; only what the gateway signed can deliver or refuse. */
export function outcomeOf(status: number, text: string | undefined, gatewayDid: string): DeliveryOutcome {
  const parsed = text === undefined ? undefined : parseWire(text);
  if (parsed === undefined || 'error' in parsed || !verifyEnvelopeText(parsed, gatewayDid)) {
    return { kind: 'retry', reason: `status ${status}, answer not signed by the gateway` };
  }
  const body = (parsed.value as { body?: Record<string, unknown> }).body ?? {};
  if (status >= 200 && status < 300 && 'event_stream' in body) return { kind: 'delivered' };
  const error = (body['error'] as { error?: { code?: unknown; retry_after_ms?: unknown } } | undefined)?.error;
  const code = typeof error?.code === 'string' ? error.code : undefined;
  const reason = `status ${status}${code === undefined ? '' : ` ${code}`}`;
  switch (code) {
    case 'connector_event.capacity':
      return { kind: 'retry', reason, afterMs: retryAfter(error?.retry_after_ms, CAPACITY_RETRY_MS) };
    case 'connector_event.unavailable':
      return { kind: 'retry', reason, afterMs: retryAfter(error?.retry_after_ms, UNAVAILABLE_RETRY_MS) };
    case 'connector_event.invalid':
    case 'connector_event.idempotency_conflict':
      return { kind: 'refused', reason };
    default:
      // not_authorized included: the lease, the replica or the admitted version it names is fixed by re-registration.
      return { kind: 'retry', reason };
  }
}

function retryAfter(asked: unknown, fallback: number): number {
  return typeof asked === 'number' && Number.isInteger(asked) && asked > 0 && asked <= MAX_RETRY_AFTER_MS ? asked : fallback;
}
