import { describe, expect, it } from 'vitest';
import type { ResolvedEndpoint } from '../../src/config.js';
import { HermesFailure } from '../../src/failures.js';
import { checkContext, checkIdempotencyKeyFormat, enforceGates, type GateInput } from '../../src/contract/policy.js';
import type { AipAction, ApprovalGrant, ExecutionContext, OperationName } from '../../src/types.js';
import { declarationOf, expectFailure, resolvedEndpoint } from '../helpers/fixtures.js';

const NOW = 1_800_000_000_000;
const APPROVAL_OPS: readonly OperationName[] = ['run_approval', 'run_stop'];

function inputFor(operation: OperationName): Record<string, unknown> {
  switch (operation) {
    case 'run_start':
      return { body: { input: 'hello' } };
    case 'run_approval':
      return { run_id: 'run_1', choice: 'once', resolve_all: false };
    case 'run_events':
      return { run_id: 'run_1', max_events: 10 };
    default:
      return { run_id: 'run_1' };
  }
}

function actionFor(operation: OperationName, overrides: Partial<AipAction> = {}): AipAction {
  return { id: 'act_1', capability_id: `cap:hermes_agent:ep1:${operation}`, input: inputFor(operation), idempotency_key: 'idem-1', ...overrides };
}

function grantFor(input: unknown, overrides: Partial<ApprovalGrant> = {}, evidence: Partial<ApprovalGrant['evidence']> = {}): ApprovalGrant {
  return {
    approvalId: 'apr_1',
    decision: 'approved',
    grantedAt: NOW - 1000,
    expiresAt: NOW + 60_000,
    ...overrides,
    evidence: { reason: 'operator confirmed', inputSnapshot: input, policyDecision: { rule: 'allow', version: 3 }, ...evidence },
  };
}

interface GateOptions {
  endpoint?: ResolvedEndpoint;
  action?: AipAction;
  context?: ExecutionContext;
  hostCancellation?: boolean;
  now?: number;
}

function gate(operation: OperationName, options: GateOptions = {}): GateInput {
  const action = options.action ?? actionFor(operation);
  return {
    endpoint: options.endpoint ?? resolvedEndpoint(),
    declaration: declarationOf(operation),
    action,
    context: options.context ?? { approval: grantFor(action.input) },
    now: options.now ?? NOW,
    hostCancellation: options.hostCancellation ?? false,
  };
}

function refusal(input: GateInput): HermesFailure {
  const error = (() => {
    try {
      enforceGates(input);
    } catch (e) {
      return e;
    }
    throw new Error('enforceGates passed');
  })();
  expect(error).toBeInstanceOf(HermesFailure);
  return error as HermesFailure;
}

const ALL_OPS: readonly OperationName[] = ['run_start', 'run_status', 'run_events', 'run_approval', 'run_stop'];

describe('a fully valid call passes every gate', () => {
  it.each(ALL_OPS)('%s', (operation) => {
    expect(() => enforceGates(gate(operation))).not.toThrow();
  });
});

describe('tenant binding', () => {
  const bound = () => resolvedEndpoint({ tenantId: 'tenant-a' });

  it.each(ALL_OPS)('%s: a bound endpoint refuses a context without a tenant', (operation) => {
    const action = actionFor(operation);
    const failure = refusal(gate(operation, { endpoint: bound(), action, context: { approval: grantFor(action.input) } }));
    expect(failure.code).toBe('tenant_mismatch');
    expect(failure.effect).toBe('none');
  });

  it.each(ALL_OPS)('%s: a bound endpoint refuses another tenant', (operation) => {
    const action = actionFor(operation);
    expect(refusal(gate(operation, { endpoint: bound(), action, context: { tenantId: 'tenant-b', approval: grantFor(action.input) } })).code).toBe(
      'tenant_mismatch',
    );
  });

  it('compares tenants exactly (no case folding, no trimming)', () => {
    const action = actionFor('run_status');
    expect(refusal(gate('run_status', { endpoint: bound(), action, context: { tenantId: 'TENANT-A' } })).code).toBe('tenant_mismatch');
    expect(refusal(gate('run_status', { endpoint: bound(), action, context: { tenantId: 'tenant-a ' } })).code).toBe('tenant_mismatch');
    expect(refusal(gate('run_status', { endpoint: bound(), action, context: { tenantId: '' } })).code).toBe('tenant_mismatch');
  });

  it.each(ALL_OPS)('%s: a bound endpoint accepts the same tenant', (operation) => {
    const action = actionFor(operation);
    expect(() =>
      enforceGates(gate(operation, { endpoint: bound(), action, context: { tenantId: 'tenant-a', approval: grantFor(action.input) } })),
    ).not.toThrow();
  });

  it('an endpoint without tenant accepts any context tenant or none', () => {
    for (const tenantId of [undefined, 'tenant-a', 'tenant-z']) {
      const action = actionFor('run_stop');
      expect(() => enforceGates(gate('run_stop', { action, context: { tenantId, approval: grantFor(action.input) } }))).not.toThrow();
    }
  });

  it('still applies to host cancellation', () => {
    expect(refusal(gate('run_stop', { endpoint: bound(), context: {}, hostCancellation: true })).code).toBe('tenant_mismatch');
  });
});

describe('credential', () => {
  it.each(ALL_OPS)('%s: an endpoint without apiKey is refused with missing_credential', (operation) => {
    const endpoint = resolvedEndpoint({ apiKey: undefined });
    expect(endpoint.apiKey).toBeUndefined();
    const failure = refusal(gate(operation, { endpoint }));
    expect(failure.code).toBe('missing_credential');
    expect(failure.message).toContain('ep1');
  });

  it('still applies to host cancellation', () => {
    expect(refusal(gate('run_stop', { endpoint: resolvedEndpoint({ apiKey: undefined }), context: {}, hostCancellation: true })).code).toBe(
      'missing_credential',
    );
  });
});

describe('idempotency key', () => {
  it('the contracts require it for start, approval and stop only', () => {
    expect(ALL_OPS.filter((op) => declarationOf(op).contract.idempotency.requirement === 'required')).toEqual(['run_start', 'run_approval', 'run_stop']);
  });

  it.each(['run_start', 'run_approval', 'run_stop'] as const)('%s without a key (absent or empty) is refused', (operation) => {
    for (const idempotency_key of [undefined, '']) {
      const action = actionFor(operation, { idempotency_key });
      if (idempotency_key === undefined) delete action.idempotency_key;
      const failure = refusal(gate(operation, { action, context: { approval: grantFor(action.input) } }));
      expect(failure.code).toBe('idempotency_key_required');
      expect(failure.message).toContain(operation);
    }
  });

  it.each(['run_status', 'run_events'] as const)('%s without a key passes', (operation) => {
    const action = actionFor(operation);
    delete action.idempotency_key;
    expect(() => enforceGates(gate(operation, { action, context: {} }))).not.toThrow();
    expect(() => enforceGates(gate(operation, { action: actionFor(operation, { idempotency_key: '' }), context: {} }))).not.toThrow();
  });

  it('host cancellation still needs the key (cancel() supplies one)', () => {
    const action = actionFor('run_stop');
    delete action.idempotency_key;
    expect(refusal(gate('run_stop', { action, context: {}, hostCancellation: true })).code).toBe('idempotency_key_required');
  });
});

describe('approval grant', () => {
  it('only approval and stop declare an approval requirement (ttl 900000)', () => {
    for (const op of ALL_OPS) {
      const approval = declarationOf(op).contract.approval;
      expect(approval?.required === true).toBe(APPROVAL_OPS.includes(op));
      if (APPROVAL_OPS.includes(op)) expect(approval?.ttl_ms).toBe(900_000);
    }
  });

  it.each(['run_start', 'run_status', 'run_events'] as const)('%s needs no grant', (operation) => {
    expect(() => enforceGates(gate(operation, { context: {} }))).not.toThrow();
  });

  describe.each(APPROVAL_OPS)('%s', (operation) => {
    const action = actionFor(operation);
    const refuseWith = (context: ExecutionContext, now = NOW) => {
      const failure = refusal(gate(operation, { action, context, now }));
      expect(failure.code).toBe('approval_required');
      expect(failure.effect).toBe('none');
      return failure;
    };
    const grant = (overrides: Partial<ApprovalGrant> = {}, evidence: Partial<ApprovalGrant['evidence']> = {}) => grantFor(action.input, overrides, evidence);
    const asGrant = (value: unknown) => value as ApprovalGrant;

    it('refuses a missing grant', () => {
      refuseWith({});
      refuseWith({ approval: asGrant(null) });
      refuseWith({ approval: asGrant('approved') });
    });

    it('refuses a denied grant', () => {
      refuseWith({ approval: grant({ decision: 'denied' }) });
      refuseWith({ approval: asGrant({ ...grant(), decision: 'APPROVED' }) });
    });

    it('refuses an empty or missing approvalId', () => {
      refuseWith({ approval: grant({ approvalId: '' }) });
      const { approvalId: _omit, ...noId } = grant();
      refuseWith({ approval: asGrant(noId) });
    });

    it('refuses a grant granted in the future', () => {
      refuseWith({ approval: grant({ grantedAt: NOW + 1, expiresAt: NOW + 60_000 }) });
    });

    it('accepts a grant granted exactly now', () => {
      expect(() => enforceGates(gate(operation, { action, context: { approval: grant({ grantedAt: NOW, expiresAt: NOW + 1 }) } }))).not.toThrow();
    });

    it('refuses an expired grant (expiresAt at or before now)', () => {
      refuseWith({ approval: grant({ grantedAt: NOW - 10_000, expiresAt: NOW }) });
      refuseWith({ approval: grant({ grantedAt: NOW - 10_000, expiresAt: NOW - 1 }) });
    });

    it('refuses a grant valid for longer than 900000 ms and accepts exactly 900000 ms', () => {
      refuseWith({ approval: grant({ grantedAt: NOW - 1, expiresAt: NOW - 1 + 900_001 }) });
      expect(() => enforceGates(gate(operation, { action, context: { approval: grant({ grantedAt: NOW - 1, expiresAt: NOW - 1 + 900_000 }) } }))).not.toThrow();
    });

    it('refuses non-numeric or non-finite times', () => {
      refuseWith({ approval: asGrant({ ...grant(), grantedAt: String(NOW - 1) }) });
      refuseWith({ approval: asGrant({ ...grant(), expiresAt: Number.POSITIVE_INFINITY }) });
      refuseWith({ approval: asGrant({ ...grant(), grantedAt: Number.NaN }) });
    });

    it('refuses an empty or blank reason', () => {
      refuseWith({ approval: grant({}, { reason: '' }) });
      refuseWith({ approval: grant({}, { reason: '  \t\n ' }) });
      refuseWith({ approval: asGrant({ ...grant(), evidence: { inputSnapshot: action.input, policyDecision: {} } }) });
    });

    it('refuses a missing policy decision', () => {
      refuseWith({ approval: grant({}, { policyDecision: undefined }) });
      refuseWith({ approval: grant({}, { policyDecision: null }) });
    });

    it('refuses missing evidence', () => {
      const { evidence: _omit, ...noEvidence } = grant();
      refuseWith({ approval: asGrant(noEvidence) });
    });

    it('refuses a snapshot that differs from the action input', () => {
      refuseWith({ approval: grant({}, { inputSnapshot: { ...(action.input as object), run_id: 'run_2' } }) });
      refuseWith({ approval: grant({}, { inputSnapshot: { ...(action.input as object), extra: true } }) });
      refuseWith({ approval: grant({}, { inputSnapshot: { run_id: 'run_1', choice: 'always' } }) });
      refuseWith({ approval: grant({}, { inputSnapshot: undefined }) });
      refuseWith({ approval: grant({}, { inputSnapshot: JSON.stringify(action.input) }) });
      const { inputSnapshot: _omit, ...noSnapshot } = grant().evidence;
      refuseWith({ approval: asGrant({ ...grant(), evidence: noSnapshot }) });
    });

    it('accepts a snapshot equal to the input with keys in another order, at every depth', () => {
      // The gate compares snapshots whatever the operation's input schema; three keys make the order visible.
      const input = { run_id: 'run_1', choice: 'once', resolve_all: false };
      const reordered = Object.fromEntries(Object.entries(input).reverse());
      expect(JSON.stringify(reordered)).not.toBe(JSON.stringify(input));
      const deepAction = actionFor(operation, { input });
      expect(() => enforceGates(gate(operation, { action: deepAction, context: { approval: grantFor(reordered) } }))).not.toThrow();
    });
  });

  it('compares nested snapshots structurally and key-order-insensitively', () => {
    // run_start has no approval; the snapshot rule is exercised with a nested object on run_stop's gate.
    const input = { run_id: 'run_1', meta: { b: [1, { y: 2, x: 1 }], a: 'z' } };
    const action = actionFor('run_stop', { input });
    const snapshot = { meta: { a: 'z', b: [1, { x: 1, y: 2 }] }, run_id: 'run_1' };
    expect(() => enforceGates(gate('run_stop', { action, context: { approval: grantFor(snapshot) } }))).not.toThrow();
    const reorderedArray = { meta: { a: 'z', b: [{ x: 1, y: 2 }, 1] }, run_id: 'run_1' };
    expect(refusal(gate('run_stop', { action, context: { approval: grantFor(reorderedArray) } })).code).toBe('approval_required');
  });

  it('host cancellation skips the approval gate only', () => {
    expect(() => enforceGates(gate('run_stop', { context: {}, hostCancellation: true }))).not.toThrow();
    expect(() => enforceGates(gate('run_stop', { context: { approval: grantFor({}, { decision: 'denied' }) }, hostCancellation: true }))).not.toThrow();
    const controller = new AbortController();
    controller.abort();
    expect(refusal(gate('run_stop', { context: { signal: controller.signal }, hostCancellation: true })).code).toBe('cancelled');
    expect(refusal(gate('run_stop', { context: { deadline: NOW }, hostCancellation: true })).code).toBe('deadline_exceeded');
  });
});

describe('time', () => {
  it.each(ALL_OPS)('%s: an already aborted signal is refused with cancelled', (operation) => {
    const controller = new AbortController();
    controller.abort();
    const action = actionFor(operation);
    const failure = refusal(gate(operation, { action, context: { signal: controller.signal, approval: grantFor(action.input) } }));
    expect(failure.code).toBe('cancelled');
    expect(failure.effect).toBe('none');
  });

  it.each(ALL_OPS)('%s: a deadline at or before now is refused with deadline_exceeded', (operation) => {
    const action = actionFor(operation);
    for (const deadline of [NOW, NOW - 1, 0]) {
      const failure = refusal(gate(operation, { action, context: { deadline, approval: grantFor(action.input) } }));
      expect(failure.code).toBe('deadline_exceeded');
      expect(failure.effect).toBe('none');
    }
  });

  it('a deadline after now and a live signal pass', () => {
    const action = actionFor('run_stop');
    expect(() =>
      enforceGates(gate('run_stop', { action, context: { deadline: NOW + 1, signal: new AbortController().signal, approval: grantFor(action.input) } })),
    ).not.toThrow();
  });

  it('cancellation is checked before the deadline', () => {
    const controller = new AbortController();
    controller.abort();
    expect(refusal(gate('run_status', { context: { signal: controller.signal, deadline: NOW - 1 } })).code).toBe('cancelled');
  });
});

describe('gate order: tenant, credential, idempotency key, approval, time', () => {
  it('reports the first failing gate and moves on as each is fixed', () => {
    const controller = new AbortController();
    controller.abort();
    const noKey = actionFor('run_stop');
    delete noKey.idempotency_key;
    const badEverything: GateOptions = {
      endpoint: resolvedEndpoint({ tenantId: 'tenant-a', apiKey: undefined }),
      action: noKey,
      context: { tenantId: 'tenant-b', signal: controller.signal, deadline: NOW - 1 },
    };
    expect(refusal(gate('run_stop', badEverything)).code).toBe('tenant_mismatch');

    const tenantFixed = { ...badEverything, context: { ...badEverything.context, tenantId: 'tenant-a' } };
    expect(refusal(gate('run_stop', tenantFixed)).code).toBe('missing_credential');

    const credentialFixed = { ...tenantFixed, endpoint: resolvedEndpoint({ tenantId: 'tenant-a' }) };
    expect(refusal(gate('run_stop', credentialFixed)).code).toBe('idempotency_key_required');

    const keyFixed = { ...credentialFixed, action: actionFor('run_stop') };
    expect(refusal(gate('run_stop', keyFixed)).code).toBe('approval_required');

    const approvalFixed = { ...keyFixed, context: { ...keyFixed.context, approval: grantFor(keyFixed.action.input) } };
    expect(refusal(gate('run_stop', approvalFixed)).code).toBe('cancelled');

    const signalFixed = { ...approvalFixed, context: { ...approvalFixed.context, signal: undefined } };
    expect(refusal(gate('run_stop', signalFixed)).code).toBe('deadline_exceeded');

    const allFixed = { ...signalFixed, context: { ...signalFixed.context, deadline: NOW + 1 } };
    expect(() => enforceGates(gate('run_stop', allFixed))).not.toThrow();
  });
});

describe('checkContext', () => {
  it('turns an undefined context into {}', () => {
    expect(checkContext(undefined)).toEqual({});
  });

  it('returns a valid context unchanged', () => {
    const context = {
      tenantId: 't',
      actor: { principalId: 'usr_1', issuer: 'https://idp.example' },
      traceId: 'trace-1',
      sessionId: 'ses_1',
      deadline: NOW,
      signal: new AbortController().signal,
      onChunk: () => undefined,
    };
    expect(checkContext(context)).toBe(context);
    expect(checkContext({ actor: { principalId: 'usr_1' } })).toEqual({ actor: { principalId: 'usr_1' } });
  });

  it.each([
    ['null', null],
    ['a string', 'tenant-a'],
    ['a number', 5],
    ['an array', [{ tenantId: 't' }]],
    ['a numeric tenantId', { tenantId: 5 }],
    ['a null tenantId', { tenantId: null }],
    ['a numeric traceId', { traceId: 1 }],
    ['an object sessionId', { sessionId: { id: 's' } }],
    ['a string actor', { actor: 'usr_1' }],
    ['a null actor', { actor: null }],
    ['an actor without principalId', { actor: { issuer: 'x' } }],
    ['an actor with a numeric principalId', { actor: { principalId: 1 } }],
    ['an actor with a numeric issuer', { actor: { principalId: 'usr_1', issuer: 2 } }],
    ['a string deadline', { deadline: String(NOW) }],
    ['a NaN deadline', { deadline: Number.NaN }],
    ['an infinite deadline', { deadline: Number.POSITIVE_INFINITY }],
    ['a signal that is not an AbortSignal', { signal: { aborted: false, addEventListener() {} } }],
    ['an AbortController as signal', { signal: new AbortController() }],
    ['a non-function onChunk', { onChunk: 'log' }],
  ])('refuses %s with invalid_input', (_name, context) => {
    const failure = expectFailure(() => checkContext(context), 'invalid_input');
    expect(failure.message).toMatch(/^The execution context is invalid/);
  });
});

describe('checkIdempotencyKeyFormat', () => {
  const withKey = (idempotency_key: string | undefined): AipAction => actionFor('run_start', { idempotency_key });

  it('accepts 255 visible ASCII characters, every visible ASCII character, absent and empty keys', () => {
    expect(() => checkIdempotencyKeyFormat(withKey('k'.repeat(255)))).not.toThrow();
    let visible = '';
    for (let c = 0x21; c <= 0x7e; c += 1) visible += String.fromCharCode(c);
    expect(() => checkIdempotencyKeyFormat(withKey(visible))).not.toThrow();
    expect(() => checkIdempotencyKeyFormat(withKey(undefined))).not.toThrow();
    expect(() => checkIdempotencyKeyFormat(withKey(''))).not.toThrow();
  });

  it.each([
    ['256 characters', 'k'.repeat(256)],
    ['an inner space', 'idem key'],
    ['a leading space', ' idem'],
    ['a tab', 'idem\tkey'],
    ['a newline', 'idem\n'],
    ['CR LF', 'idem\r\nX-Injected: 1'],
    ['a NUL', 'idem\u0000'],
    ['DEL', 'idem\u007f'],
    ['non-ASCII', 'idém'],
    ['an emoji', 'idem-😀'],
  ])('refuses a key with %s as invalid_input', (_name, key) => {
    expectFailure(() => checkIdempotencyKeyFormat(withKey(key)), 'invalid_input');
  });
});
