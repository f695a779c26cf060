import { createHash } from 'node:crypto';
import type { ResolvedEndpoint } from '../config.js';
import { HermesFailure } from '../failures.js';
import { USER_AGENT } from '../internal/package-info.js';
import type { AipAction, ExecutionContext } from '../types.js';

const MAX_HEADER_VALUE = 16 * 1024;
/** Visible ASCII with inner spaces: what survives HTTP unchanged and what Hermes can compare. */
const HEADER_VALUE = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

export interface HeaderSources {
  endpoint: ResolvedEndpoint;
  action: AipAction;
  context: ExecutionContext;
  accept: 'application/json' | 'text/event-stream';
  hasBody: boolean;
  sessionKey?: string;
}

/**
 * The exact headers of a provider request. Values come from the endpoint, the action's
 * AIP envelope fields and the trusted context; nothing in `action.input` reaches here
 * except `session_key`, which has its own schema.
 */
export function buildHeaders({ endpoint, action, context, accept, hasBody, sessionKey }: HeaderSources): Record<string, string> {
  const headers: Record<string, string> = {
    // The credential gate runs before this, so the key is present.
    authorization: `Bearer ${endpoint.apiKey?.reveal() ?? ''}`,
    'user-agent': USER_AGENT,
    accept,
  };
  if (hasBody) headers['content-type'] = 'application/json';
  setHeader(headers, 'Idempotency-Key', providerIdempotencyKey(action, context.tenantId));
  setHeader(headers, 'X-Hermes-Session-Key', sessionKey);
  setHeader(headers, 'X-AIP-Principal-Id', context.actor?.principalId);
  setHeader(headers, 'X-AIP-Authentication-Issuer', context.actor?.issuer);
  setHeader(headers, 'X-AIP-Tenant-Id', context.tenantId);
  setHeader(headers, 'X-AIP-Trace-Id', context.traceId);
  setHeader(headers, 'X-AIP-Correlation-Id', context.traceId);
  setHeader(headers, 'X-AIP-Session-Id', context.sessionId);
  if (context.deadline !== undefined) setHeader(headers, 'X-AIP-Deadline-Unix-Ms', String(Math.floor(context.deadline)));
  if (Array.isArray(action.delegation_chain) && action.delegation_chain.length > 0) {
    setHeader(headers, 'X-AIP-Delegation-Chain', asciiJson(action.delegation_chain));
  }
  return headers;
}

/** Sets a header from the envelope or context when it has a value; throws `invalid_input` for a value HTTP cannot carry as it is. */
function setHeader(headers: Record<string, string>, name: string, value: string | undefined): void {
  if (value === undefined) return;
  if (value.length > MAX_HEADER_VALUE || !HEADER_VALUE.test(value)) {
    throw new HermesFailure('invalid_input', `The value for header ${name} is not a valid header value (visible ASCII, at most 16 KiB)`);
  }
  headers[name.toLowerCase()] = value;
}

/**
 * The `Idempotency-Key` Hermes sees: derived from the verified tenant, the capability and the
 * caller's key, so a Hermes that honours keys scopes them exactly as the connector's ledger
 * does. Forwarded raw, tenant A's key would replay A's run to tenant B on a shared endpoint.
 * `aip1-` and 64 hex digits: a valid key on every Hermes. Undefined when the action has no key
 * (an empty key is no key: the gates treat it as missing where one is required).
 */
export function providerIdempotencyKey(action: Pick<AipAction, 'capability_id' | 'idempotency_key'>, tenantId: string | undefined): string | undefined {
  if (!action.idempotency_key) return undefined;
  const digest = createHash('sha256')
    .update(JSON.stringify([tenantId ?? null, action.capability_id, action.idempotency_key]))
    .digest('hex');
  return `aip1-${digest}`;
}

/** Whether an idempotency key can travel as a header: 1-255 visible ASCII characters. */
export function isValidIdempotencyKey(key: string): boolean {
  return IDEMPOTENCY_KEY.test(key);
}

/** JSON with every non-ASCII character escaped, so it is a legal header value. */
function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
