import { describe, expect, it } from 'vitest';
import {
  FAILURE_CATEGORIES,
  HermesFailure,
  failureFromHttpStatus,
  isReadOperation,
  parseRetryAfter,
  providerCodeOf,
  toProtocolError,
  type FailureCode,
  type ProviderEffect,
} from '../src/failures.js';
import { OPERATION_NAMES, type OperationName } from '../src/types.js';

const PREFIX = 'connector.hermes_agent.';
const READS: readonly OperationName[] = ['run_status', 'run_events'];
const MUTATIONS: readonly OperationName[] = ['run_start', 'run_approval', 'run_stop', 'run_steer'];
const ALL_CODES = Object.keys(FAILURE_CATEGORIES) as FailureCode[];
const EFFECTS: readonly ProviderEffect[] = ['none', 'known', 'maybe'];

describe('FAILURE_CATEGORIES (the API doc error table)', () => {
  it('gives every documented code its documented category', () => {
    expect(FAILURE_CATEGORIES).toMatchObject({
      invalid_input: 'permanent',
      unsupported_capability: 'permanent',
      idempotency_key_required: 'permanent',
      approval_required: 'policy',
      tenant_mismatch: 'auth',
      missing_credential: 'auth',
      deadline_exceeded: 'temporary',
      cancelled: 'temporary',
      authentication: 'auth',
      not_found: 'permanent',
      conflict: 'permanent',
      rate_limited: 'temporary',
      remote_rejected: 'permanent',
      remote_temporary: 'temporary',
      transport: 'transport',
      invalid_response: 'connector',
      stream_failed: 'connector',
      stream_truncated: 'connector',
      stream_incomplete: 'connector',
    });
  });

  it('classifies status and events as the only reads', () => {
    expect(OPERATION_NAMES.filter(isReadOperation)).toEqual(['run_status', 'run_events']);
  });
});

describe('failureFromHttpStatus', () => {
  const cases: Array<[number, FailureCode, ProviderEffect]> = [
    [301, 'remote_rejected', 'known'],
    [302, 'remote_rejected', 'known'],
    [307, 'remote_rejected', 'known'],
    [308, 'remote_rejected', 'known'],
    [400, 'remote_rejected', 'known'],
    [401, 'authentication', 'known'],
    [403, 'authentication', 'known'],
    [404, 'not_found', 'known'],
    [409, 'conflict', 'known'],
    [410, 'remote_rejected', 'known'],
    [413, 'remote_rejected', 'known'],
    [422, 'remote_rejected', 'known'],
    [429, 'rate_limited', 'known'],
    [500, 'remote_temporary', 'maybe'],
    [502, 'remote_temporary', 'maybe'],
    [503, 'remote_temporary', 'maybe'],
    [504, 'remote_temporary', 'maybe'],
  ];

  it.each(cases)('maps HTTP %i to %s (effect %s)', (status, code, effect) => {
    const failure = failureFromHttpStatus(status, 'ep1', undefined, undefined);
    expect(failure).toBeInstanceOf(HermesFailure);
    expect(failure.code).toBe(code);
    expect(failure.effect).toBe(effect);
    expect(failure.remoteStatus).toBe(status);
    expect(failure.providerCode).toBeUndefined();
    expect(failure.retryAfterMs).toBeUndefined();
    expect(failure.message).toContain(`HTTP ${status}`);
    expect(failure.message).toContain('ep1');
  });

  it('says that redirects are never followed for a 3xx', () => {
    expect(failureFromHttpStatus(302, 'ep1', undefined, undefined).message).toMatch(/redirect/i);
  });

  it('keeps retryAfterMs for 429 only', () => {
    const limited = failureFromHttpStatus(429, 'ep1', 'too_many_runs', 2000);
    expect(limited.retryAfterMs).toBe(2000);
    expect(limited.providerCode).toBe('too_many_runs');
    expect(failureFromHttpStatus(503, 'ep1', undefined, 2000).retryAfterMs).toBeUndefined();
    expect(failureFromHttpStatus(400, 'ep1', undefined, 2000).retryAfterMs).toBeUndefined();
  });

  it('carries the provider code on every status', () => {
    for (const [status] of cases) expect(failureFromHttpStatus(status, 'ep1', 'approval_not_pending', undefined).providerCode).toBe('approval_not_pending');
  });

  it('maps a 429 on a mutation to a retryable, certain rate_limited error with retry_after_ms', () => {
    for (const operation of OPERATION_NAMES) {
      const error = toProtocolError(failureFromHttpStatus(429, 'ep1', undefined, 1500), 'ep1', operation);
      expect(error).toMatchObject({ code: `${PREFIX}rate_limited`, category: 'temporary', retryable: true, retry_after_ms: 1500 });
      expect(error.details).toEqual({ endpoint_id: 'ep1', operation, uncertain_outcome: false, remote_status: 429 });
    }
  });

  it('maps a 5xx on a mutation to an uncertain, non-retryable error and on a read to a retryable one', () => {
    for (const operation of MUTATIONS) {
      const error = toProtocolError(failureFromHttpStatus(502, 'ep1', undefined, undefined), 'ep1', operation);
      expect(error).toMatchObject({ code: `${PREFIX}remote_temporary`, category: 'temporary', retryable: false });
      expect(error.details?.uncertain_outcome).toBe(true);
      expect(error.details?.remote_status).toBe(502);
    }
    for (const operation of READS) {
      const error = toProtocolError(failureFromHttpStatus(502, 'ep1', undefined, undefined), 'ep1', operation);
      expect(error).toMatchObject({ code: `${PREFIX}remote_temporary`, retryable: true });
      expect(error.details?.uncertain_outcome).toBe(false);
    }
  });
});

/** The rule of the API doc, written independently of the implementation. */
function expectedRetryable(code: FailureCode, operation: OperationName): boolean {
  // All three are refused before Hermes acts (the 429 gate, a draining gateway, the ledger), so trying again later is safe.
  if (code === 'rate_limited' || code === 'draining' || code === 'ledger_unavailable') return true;
  const category = FAILURE_CATEGORIES[code];
  const read = READS.includes(operation);
  return read && (category === 'temporary' || category === 'transport') && code !== 'cancelled' && code !== 'deadline_exceeded';
}

describe('toProtocolError retryable / uncertain_outcome matrix', () => {
  for (const operation of OPERATION_NAMES) {
    for (const code of ALL_CODES) {
      it(`${operation} ${code} (effects none/known/maybe)`, () => {
        for (const effect of EFFECTS) {
          const error = toProtocolError(new HermesFailure(code, 'm', { effect }), 'ep1', operation);
          const uncertain = MUTATIONS.includes(operation) && effect === 'maybe';
          expect(error.code).toBe(PREFIX + code);
          expect(error.category).toBe(FAILURE_CATEGORIES[code]);
          expect(error.retryable).toBe(expectedRetryable(code, operation));
          expect(error.details).toEqual({ endpoint_id: 'ep1', operation, uncertain_outcome: uncertain });
          // An uncertain mutation is never retryable (rate_limited, draining and ledger_unavailable are refused before Hermes acts).
          if (uncertain) expect(error.retryable).toBe(code === 'rate_limited' || code === 'draining' || code === 'ledger_unavailable');
        }
      });
    }
  }

  it('spot checks: read transport retryable, read cancelled/deadline not, mutation transport not', () => {
    const t = (code: FailureCode, op: OperationName, effect: ProviderEffect = 'maybe') => toProtocolError(new HermesFailure(code, 'm', { effect }), 'e', op);
    expect(t('transport', 'run_status').retryable).toBe(true);
    expect(t('transport', 'run_events').retryable).toBe(true);
    expect(t('remote_temporary', 'run_status').retryable).toBe(true);
    expect(t('cancelled', 'run_status').retryable).toBe(false);
    expect(t('deadline_exceeded', 'run_events').retryable).toBe(false);
    expect(t('transport', 'run_start').retryable).toBe(false);
    expect(t('transport', 'run_start').details?.uncertain_outcome).toBe(true);
    expect(t('cancelled', 'run_stop').details?.uncertain_outcome).toBe(true);
    expect(t('deadline_exceeded', 'run_approval').details?.uncertain_outcome).toBe(true);
    expect(t('transport', 'run_start', 'none').details?.uncertain_outcome).toBe(false);
    expect(t('not_found', 'run_status', 'known').retryable).toBe(false);
    expect(t('authentication', 'run_status', 'known').retryable).toBe(false);
    expect(t('invalid_response', 'run_events', 'known').retryable).toBe(false);
  });
});

describe('toProtocolError shape', () => {
  it('builds the full error with prefix, message, category, source and all details', () => {
    const failure = new HermesFailure('conflict', 'Hermes said no', {
      effect: 'known',
      remoteStatus: 409,
      providerCode: 'approval_not_pending',
      details: { run_id_known: true },
    });
    expect(toProtocolError(failure, 'ep1', 'run_approval')).toEqual({
      code: 'connector.hermes_agent.conflict',
      message: 'Hermes said no',
      category: 'permanent',
      retryable: false,
      details: {
        run_id_known: true,
        endpoint_id: 'ep1',
        operation: 'run_approval',
        uncertain_outcome: false,
        remote_status: 409,
        provider_code: 'approval_not_pending',
      },
      source: { component: 'aip-connector-hermes-agent' },
    });
  });

  it('sets retry_after_ms only when known, including 0', () => {
    expect('retry_after_ms' in toProtocolError(new HermesFailure('rate_limited', 'm'), 'ep1', 'run_start')).toBe(false);
    expect(toProtocolError(new HermesFailure('rate_limited', 'm', { retryAfterMs: 0 }), 'ep1', 'run_start').retry_after_ms).toBe(0);
  });

  it('does not let failure details override the computed fields', () => {
    const failure = new HermesFailure('transport', 'm', {
      effect: 'maybe',
      details: { uncertain_outcome: false, endpoint_id: 'forged', operation: 'run_status' },
    });
    const error = toProtocolError(failure, 'ep1', 'run_stop');
    expect(error.details).toEqual({ endpoint_id: 'ep1', operation: 'run_stop', uncertain_outcome: true });
  });

  it('without an endpoint or operation (unknown capability) is never uncertain nor retryable', () => {
    const error = toProtocolError(new HermesFailure('unsupported_capability', 'm', { effect: 'maybe' }), undefined, undefined);
    expect(error).toMatchObject({ code: `${PREFIX}unsupported_capability`, category: 'permanent', retryable: false });
    expect(error.details).toEqual({ uncertain_outcome: false });
    const transport = toProtocolError(new HermesFailure('transport', 'm', { effect: 'maybe' }), undefined, undefined);
    expect(transport.retryable).toBe(false);
    expect(transport.details?.uncertain_outcome).toBe(false);
  });

  it('defaults the effect of a HermesFailure to none', () => {
    const failure = new HermesFailure('transport', 'm');
    expect(failure.effect).toBe('none');
    expect(failure.name).toBe('HermesFailure');
    expect(failure).toBeInstanceOf(Error);
    expect(toProtocolError(failure, 'ep1', 'run_start').details?.uncertain_outcome).toBe(false);
  });
});

describe('providerCodeOf', () => {
  it.each([
    [{ error: { code: 'approval_not_pending' } }, 'approval_not_pending'],
    [{ error: { code: 'run_not_found', message: 'Run not found' } }, 'run_not_found'],
    [{ error: { code: 'rate_limit_exceeded' } }, 'rate_limit_exceeded'],
    [{ error: { code: 'a'.repeat(64) } }, 'a'.repeat(64)],
  ])('accepts the snake_case token in %j', (body, code) => {
    expect(providerCodeOf(body)).toBe(code);
  });

  it.each([
    ['free text with spaces', { error: { code: 'Run not found' } }],
    ['65 characters', { error: { code: 'a'.repeat(65) } }],
    ['upper case', { error: { code: 'RUN_NOT_FOUND' } }],
    ['dots and dashes', { error: { code: 'invalid.request-1' } }],
    ['a leading digit', { error: { code: '1_code' } }],
    ['an empty string', { error: { code: '' } }],
    ['a newline', { error: { code: 'bad\ncode' } }],
    ['non-ASCII', { error: { code: 'café' } }],
    ['a quote', { error: { code: 'a"b' } }],
    ['a number', { error: { code: 409 } }],
    ['null', { error: { code: null } }],
    ['an object', { error: { code: { nested: 'x' } } }],
    ['an array', { error: { code: ['x'] } }],
    ['no code', { error: { message: 'x' } }],
    ['error as a string', { error: 'approval_not_pending' }],
    ['error null', { error: null }],
    ['a top-level code only', { code: 'approval_not_pending' }],
    ['a null body', null],
    ['a string body', 'approval_not_pending'],
    ['an undefined body', undefined],
    ['a number body', 5],
  ])('refuses %s', (_name, body) => {
    expect(providerCodeOf(body)).toBeUndefined();
  });

  it('refuses a code that carries the endpoint key, or is part of it', () => {
    const key = 'hk_live_0123456789';
    expect(providerCodeOf({ error: { code: key } }, key)).toBeUndefined();
    expect(providerCodeOf({ error: { code: `prefix_${key}` } }, key)).toBeUndefined();
    expect(providerCodeOf({ error: { code: 'hk_live' } }, key)).toBeUndefined();
    expect(providerCodeOf({ error: { code: 'run_not_found' } }, key)).toBe('run_not_found');
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('Wed, 21 Oct 2015 07:28:00 GMT');

  it.each([
    ['1', 1000],
    [' 2 ', 2000],
    ['0', 0],
    ['120', 120_000],
    ['Wed, 21 Oct 2015 07:28:30 GMT', 30_000],
    ['Wed, 21 Oct 2015 07:30:00 GMT', 120_000],
    ['Wed, 21 Oct 2015 07:27:00 GMT', 0],
  ])('parses %j as %i ms', (value, ms) => {
    expect(parseRetryAfter(value, now)).toBe(ms);
  });

  it('takes the first value of an array', () => {
    expect(parseRetryAfter(['3', '4'], now)).toBe(3000);
    expect(parseRetryAfter(['Wed, 21 Oct 2015 07:28:05 GMT'], now)).toBe(5000);
    expect(parseRetryAfter([], now)).toBeUndefined();
    expect(parseRetryAfter(['soon', '4'], now)).toBeUndefined();
  });

  it('gives undefined when absent or blank', () => {
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
    expect(parseRetryAfter('', now)).toBeUndefined();
    expect(parseRetryAfter('   ', now)).toBeUndefined();
  });

  it.each(['soon', 'garbage', 'Tomorrow', 'later please', '0x10', '1e3', 'NaN', '12345678901'])('gives undefined for garbage %j', (value) => {
    expect(parseRetryAfter(value, now)).toBeUndefined();
  });

  // Neither delta-seconds (1*DIGIT) nor an HTTP-date (RFC 9110 §10.2.3): no retry hint may be made up from them.
  it.each(['1.5', '-1', '+3', '5 seconds', 'in 2', 'abc 2024'])('gives undefined for the malformed value %j', (value) => {
    expect(parseRetryAfter(value, now)).toBeUndefined();
  });
});
