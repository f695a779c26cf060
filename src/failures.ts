import { ERROR_CODE_PREFIX } from './internal/package-info.js';
import type { AipErrorDetails, AipProtocolError, ErrorCategory, OperationName } from './types.js';
import { isReadContract, schemaCatalog } from './contract/schemas.js';

/** Whether Hermes was asked when a failure is reported: `maybe` failures of mutations are uncertain outcomes. */
export type ProviderCalled = 'no' | 'yes' | 'maybe';

/**
 * The error catalogue: every failure the connector reports, as the suffix of
 * `connector.hermes_agent.<suffix>`, with its category and whether Hermes was asked.
 * `docs/errors.md` (shipped in the package) states the same table; a test holds them equal.
 */
export const FAILURE_CATALOGUE = {
  invalid_input: { category: 'permanent', providerCalled: 'no' },
  unsupported_capability: { category: 'permanent', providerCalled: 'no' },
  idempotency_key_required: { category: 'permanent', providerCalled: 'no' },
  approval_required: { category: 'policy', providerCalled: 'no' },
  tenant_mismatch: { category: 'auth', providerCalled: 'no' },
  missing_credential: { category: 'auth', providerCalled: 'no' },
  deadline_exceeded: { category: 'temporary', providerCalled: 'maybe' },
  cancelled: { category: 'temporary', providerCalled: 'maybe' },
  authentication: { category: 'auth', providerCalled: 'yes' },
  not_found: { category: 'permanent', providerCalled: 'yes' },
  conflict: { category: 'permanent', providerCalled: 'yes' },
  provider_idempotency_conflict: { category: 'permanent', providerCalled: 'yes' },
  rate_limited: { category: 'temporary', providerCalled: 'yes' },
  draining: { category: 'temporary', providerCalled: 'yes' },
  remote_rejected: { category: 'permanent', providerCalled: 'yes' },
  remote_temporary: { category: 'temporary', providerCalled: 'yes' },
  transport: { category: 'transport', providerCalled: 'maybe' },
  invalid_response: { category: 'connector', providerCalled: 'yes' },
  stream_failed: { category: 'connector', providerCalled: 'yes' },
  run_interrupted: { category: 'connector', providerCalled: 'yes' },
  stream_truncated: { category: 'connector', providerCalled: 'yes' },
  stream_incomplete: { category: 'connector', providerCalled: 'yes' },
  stream_publication: { category: 'connector', providerCalled: 'yes' },
  resume_unsupported: { category: 'permanent', providerCalled: 'yes' },
  idempotency_conflict: { category: 'permanent', providerCalled: 'no' },
  outcome_unknown: { category: 'connector', providerCalled: 'maybe' },
  ledger_unavailable: { category: 'temporary', providerCalled: 'no' },
  internal: { category: 'connector', providerCalled: 'maybe' },
} as const satisfies Record<string, { category: ErrorCategory; providerCalled: ProviderCalled }>;

export type FailureCode = keyof typeof FAILURE_CATALOGUE;

/** Each failure's category (the catalogue's first column), as the API doc tables it. */
export const FAILURE_CATEGORIES = Object.freeze(
  Object.fromEntries(Object.entries(FAILURE_CATALOGUE).map(([code, entry]) => [code, entry.category])) as {
    readonly [Code in FailureCode]: (typeof FAILURE_CATALOGUE)[Code]['category'];
  },
);

/** The full AIP error code of a failure: `connector.hermes_agent.<code>`. */
export function errorCode(code: FailureCode): string {
  return ERROR_CODE_PREFIX + code;
}

/**
 * Whether the provider may have acted before this failure. Only matters for mutations:
 * `maybe` failures of run_start/run_approval/run_stop are reported as uncertain outcomes.
 */
export type ProviderEffect = 'none' | 'known' | 'maybe';

export interface FailureInit {
  effect?: ProviderEffect;
  remoteStatus?: number;
  providerCode?: string;
  retryAfterMs?: number;
  details?: Record<string, unknown>;
}

/**
 * The connector's internal failure. Operations throw it; the pipeline turns it into an
 * AIP result. Its message is written by the connector and never carries provider bodies,
 * header values or secrets.
 */
export class HermesFailure extends Error {
  readonly code: FailureCode;
  readonly effect: ProviderEffect;
  readonly remoteStatus: number | undefined;
  readonly providerCode: string | undefined;
  readonly retryAfterMs: number | undefined;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: FailureCode, message: string, init: FailureInit = {}) {
    super(message);
    this.name = 'HermesFailure';
    this.code = code;
    this.effect = init.effect ?? 'none';
    this.remoteStatus = init.remoteStatus;
    this.providerCode = init.providerCode;
    this.retryAfterMs = init.retryAfterMs;
    this.details = init.details;
  }
}

const NOT_RETRYABLE_EVEN_FOR_READS: ReadonlySet<FailureCode> = new Set(['cancelled', 'deadline_exceeded']);
/** Failures where the provider certainly was not asked, and asking again later may work. */
const RETRYABLE_FOR_EVERY_OPERATION: ReadonlySet<FailureCode> = new Set(['rate_limited', 'draining', 'ledger_unavailable']);

/** An operation whose contract declares no `write` side effect: retrying it is safe, and its outcome is never uncertain. */
export function isReadOperation(operation: OperationName): boolean {
  return isReadContract(schemaCatalog().operations[operation].declaration.contract);
}

/** The one place that decides `retryable` and `uncertain_outcome`. */
export function toProtocolError(failure: HermesFailure, endpointId: string | undefined, operation: OperationName | undefined): AipProtocolError {
  const category = FAILURE_CATEGORIES[failure.code];
  const read = operation !== undefined && isReadOperation(operation);
  const uncertain = operation !== undefined && !read && failure.effect === 'maybe';
  const retryable =
    RETRYABLE_FOR_EVERY_OPERATION.has(failure.code) ||
    (read && (category === 'temporary' || category === 'transport') && !NOT_RETRYABLE_EVEN_FOR_READS.has(failure.code));

  const details: AipErrorDetails = { ...failure.details, uncertain_outcome: uncertain };
  if (endpointId !== undefined) details.endpoint_id = endpointId;
  if (operation !== undefined) details.operation = operation;
  if (failure.remoteStatus !== undefined) details.remote_status = failure.remoteStatus;
  if (failure.providerCode !== undefined) details.provider_code = failure.providerCode;

  const error: AipProtocolError = {
    code: errorCode(failure.code),
    message: failure.message,
    category,
    retryable,
    details,
    source: { component: 'aip-connector-hermes-agent' },
  };
  if (failure.retryAfterMs !== undefined) error.retry_after_ms = failure.retryAfterMs;
  return error;
}

/** One mapping from an HTTP status to a failure (2xx never reaches here). */
export function failureFromHttpStatus(status: number, endpointId: string, providerCode: string | undefined, retryAfterMs: number | undefined): HermesFailure {
  const answered = `Hermes endpoint \`${endpointId}\` answered HTTP ${status}`;
  const init: FailureInit = { effect: 'known', remoteStatus: status, providerCode };
  if (status === 401 || status === 403) return new HermesFailure('authentication', `${answered}: the endpoint credential was refused`, init);
  if (status === 404)
    return new HermesFailure('not_found', `${answered}: the run is not known to this Hermes process (unknown id, retention expiry or restart)`, init);
  if (status === 409 && providerCode === 'idempotency_key_conflict') {
    // Hermes (0.22 and later) holds the derived key for another request body and refused before acting.
    return new HermesFailure('provider_idempotency_conflict', `${answered}: Hermes holds this idempotency key for a different request`, init);
  }
  if (status === 409) return new HermesFailure('conflict', `${answered}: the run is not in a state that accepts this request`, init);
  if (status === 429) {
    // Hermes refuses at its concurrency gate before reading the body: nothing happened.
    return new HermesFailure('rate_limited', `${answered}: too many concurrent runs`, { ...init, retryAfterMs });
  }
  if (status === 503 && providerCode === 'gateway_draining') {
    // Hermes (0.19 and later) refuses new work while its gateway shuts down, before acting.
    return new HermesFailure('draining', `${answered}: the gateway is shutting down and refused before acting`, { ...init, retryAfterMs });
  }
  if (status >= 500) return new HermesFailure('remote_temporary', `${answered}: provider error`, { ...init, effect: 'maybe' });
  if (status >= 300 && status < 400) return new HermesFailure('remote_rejected', `${answered}: redirects are never followed`, init);
  return new HermesFailure('remote_rejected', `${answered}: the request was rejected`, init);
}

/** Hermes error codes are lowercase snake_case tokens (`run_not_found`, `approval_not_pending`, …). */
const PROVIDER_CODE = /^[a-z][a-z0-9_]{0,63}$/;

/**
 * Extracts Hermes' `error.code` from an error body, only when it is a short snake_case token, and
 * never when it carries the endpoint's key (a broken or hostile server echoing the credential).
 */
export function providerCodeOf(body: unknown, secret?: string): string | undefined {
  if (body === null || typeof body !== 'object') return undefined;
  const error = (body as { error?: unknown }).error;
  if (error === null || typeof error !== 'object') return undefined;
  const code = (error as { code?: unknown }).code;
  if (typeof code !== 'string' || !PROVIDER_CODE.test(code)) return undefined;
  return secret && (code.includes(secret) || secret.includes(code)) ? undefined : code;
}

/** An IMF-fixdate, the HTTP date form servers send (RFC 9110 §5.6.7). */
const HTTP_DATE = /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;

/** `Retry-After` as milliseconds: delta-seconds or an HTTP date; anything else is no hint at all. */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (raw === undefined) return undefined;
  const trimmed = raw.trim();
  if (/^\d{1,9}$/.test(trimmed)) return Number(trimmed) * 1000;
  if (!HTTP_DATE.test(trimmed)) return undefined;
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}
