/**
 * INTERIM, until host-wire lands `wire/envelope-schema`, `wire/reference-types` and
 * `wire/approval`: the envelope checks of steps 1–2 and the approval record check of 6b, reduced
 * to what the message path needs. Replaced by host-wire's at merge; nothing else imports this file.
 */
import type { Json } from './wire/json.js';
import { fromTimeArray, parseRfc3339 } from './wire/time.js';

const ENVELOPE_FIELDS = [
  'aip_version',
  'message_type',
  'message_id',
  'sent_at',
  'body',
  'session_id',
  'correlation_id',
  'in_response_to',
  'idempotency_key',
  'from',
  'to',
  'trace',
  'security',
  'extensions',
];

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

/** Step 1: the envelope's required members and their JSON types; the error text, or undefined. */
export function validateEnvelopeSchema(value: Json): string | undefined {
  if (!isObject(value)) return 'the envelope must be a JSON object';
  for (const field of ['aip_version', 'message_type', 'message_id', 'sent_at']) {
    if (typeof value[field] !== 'string') return `\`${field}\` is required and must be a string`;
  }
  if (!isObject(value.body)) return '`body` is required and must be an object';
  return undefined;
}

/** Step 2: what the typed decode of `Envelope` refuses, and the fields it keeps. */
export const reserialize = {
  envelope(value: Json): { ok: true; value: Record<string, unknown> } | { ok: false; reason: string } {
    const envelope = value as Record<string, unknown>;
    if (envelope.aip_version !== '1.0') return { ok: false, reason: 'unsupported aip_version' };
    if (!/^msg_[0-9a-f]{32}$/.test(String(envelope.message_id))) return { ok: false, reason: 'invalid message_id' };
    if (parseRfc3339(String(envelope.sent_at)) === undefined) return { ok: false, reason: 'invalid sent_at' };
    const body = envelope.body as Record<string, unknown>;
    if (Object.keys(body).length !== 1) return { ok: false, reason: 'body must hold exactly one message' };
    for (const field of ['from', 'to']) {
      const principal = envelope[field];
      if (principal !== undefined && (!isObject(principal) || typeof principal.id !== 'string' || typeof principal.kind !== 'string')) {
        return { ok: false, reason: `invalid \`${field}\`` };
      }
    }
    if (envelope.security !== undefined && !isObject(envelope.security)) return { ok: false, reason: 'invalid security' };
    const action = body.action;
    if (action !== undefined && (!isObject(action) || typeof action.id !== 'string' || typeof action.capability_id !== 'string' || !('input' in action))) {
      return { ok: false, reason: 'invalid action' };
    }
    const typed: Record<string, unknown> = {};
    for (const field of ENVELOPE_FIELDS) if (envelope[field] !== undefined && envelope[field] !== null) typed[field] = envelope[field];
    return { ok: true, value: typed };
  },
};

/** 6b: the record authorises this action for this tenant, approved, by the decision the action carries. */
export function checkApprovalAuthorization(record: unknown, action: Record<string, unknown>, hostTenant: string): { ok: true } | { ok: false; reason: string } {
  if (!isObject(record) || !isObject(record.request)) return { ok: false, reason: 'the record is malformed' };
  const request = record.request;
  const decision = action.approval as Record<string, unknown> | undefined;
  const identity = isObject(request.identity) && isObject(request.identity.tenant) ? request.identity.tenant : undefined;
  const matches =
    isObject(decision) &&
    decision.decision === 'approved' &&
    record.status === 'approved' &&
    JSON.stringify(record.decision) === JSON.stringify(decision) &&
    request.id === decision.approval_id &&
    request.action_id === action.id &&
    request.capability_id === action.capability_id &&
    identity?.id === hostTenant &&
    (decision.policy_hash ?? null) === (request.policy_hash ?? null);
  if (!matches) return { ok: false, reason: 'it does not match the action, tenant, policy, or terminal decision' };
  const decisions = Array.isArray(record.decisions) ? record.decisions : [];
  const approved = decisions.filter((entry) => isObject(entry) && isObject(entry.decision) && entry.decision.decision === 'approved');
  const last = approved.at(-1) as Record<string, unknown> | undefined;
  if (last === undefined || JSON.stringify(last.decision) !== JSON.stringify(decision) || fromTimeArray(last.recorded_at) === undefined) {
    return { ok: false, reason: 'it cannot reproduce its approved policy' };
  }
  return { ok: true };
}
