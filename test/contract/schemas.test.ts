import { readFileSync, readdirSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { createHermesConnector } from '../../src/connector.js';
import { schemaCatalog } from '../../src/contract/schemas.js';
import { OPERATION_NAMES, type OperationName } from '../../src/types.js';
import { LOCAL_BASE_URL, PROJECT_ROOT, TEST_API_KEY } from '../helpers/fixtures.js';

const CONTRACTS_DIR = new URL('contracts/', PROJECT_ROOT);
const catalog = schemaCatalog();

interface Expected {
  method: 'GET' | 'POST';
  path: string;
  streaming: boolean;
  risk: 'low' | 'medium';
  approval: boolean;
  idempotency: 'required' | 'optional';
  providerTimeoutMs: number | null;
  slaTimeoutMs: number;
  sideEffects: string[];
  sensitivity: string;
  pii: boolean;
  execution: { supports_sync: boolean; supports_async: boolean; supports_streaming: boolean; supports_cancel: boolean; supports_retry: boolean };
}

const exec = (flags: Array<'sync' | 'async' | 'streaming' | 'cancel' | 'retry'>) => ({
  supports_sync: flags.includes('sync'),
  supports_async: flags.includes('async'),
  supports_streaming: flags.includes('streaming'),
  supports_cancel: flags.includes('cancel'),
  supports_retry: flags.includes('retry'),
});

/** Approval, stop and steer: a mutation of one run behind an AIP approval grant. */
const guardedRunMutation = (path: string): Expected => ({
  method: 'POST',
  path,
  streaming: false,
  risk: 'medium',
  approval: true,
  idempotency: 'required',
  providerTimeoutMs: 30_000,
  slaTimeoutMs: 60_000,
  sideEffects: ['read', 'write', 'external_network'],
  sensitivity: 'restricted',
  pii: true,
  execution: exec(['sync']),
});

/** The capability table and the paragraph below it in docs/connector-api.md. */
const TABLE: Record<OperationName, Expected> = {
  run_start: {
    method: 'POST',
    path: '/v1/runs',
    streaming: false,
    risk: 'medium',
    approval: false,
    idempotency: 'required',
    providerTimeoutMs: 60_000,
    slaTimeoutMs: 60_000,
    sideEffects: ['read', 'write', 'external_network'],
    sensitivity: 'confidential',
    pii: true,
    execution: exec(['sync', 'async']),
  },
  run_status: {
    method: 'GET',
    path: '/v1/runs/{run_id}',
    streaming: false,
    risk: 'low',
    approval: false,
    idempotency: 'optional',
    providerTimeoutMs: 30_000,
    slaTimeoutMs: 60_000,
    sideEffects: ['read', 'external_network'],
    sensitivity: 'internal',
    pii: false,
    execution: exec(['sync', 'retry']),
  },
  run_events: {
    method: 'GET',
    path: '/v1/runs/{run_id}/events',
    streaming: true,
    risk: 'low',
    approval: false,
    idempotency: 'optional',
    providerTimeoutMs: null,
    slaTimeoutMs: 300_000,
    sideEffects: ['read', 'external_network'],
    sensitivity: 'confidential',
    pii: false,
    execution: exec(['sync', 'async', 'streaming', 'cancel', 'retry']),
  },
  run_approval: guardedRunMutation('/v1/runs/{run_id}/approval'),
  run_stop: guardedRunMutation('/v1/runs/{run_id}/stop'),
  // Not in the seed's table: the opt-in sixth operation (issue 32, item 7), contracted as run_approval is.
  run_steer: guardedRunMutation('/v1/runs/{run_id}/steer'),
};

function readContract(operation: string): Record<string, unknown> {
  return JSON.parse(readFileSync(new URL(`${operation}.json`, CONTRACTS_DIR), 'utf8')) as Record<string, unknown>;
}

describe('contracts/*.json', () => {
  it('holds exactly one file per operation', () => {
    expect(readdirSync(CONTRACTS_DIR).sort()).toEqual(OPERATION_NAMES.map((op) => `${op}.json`).sort());
  });

  it.each(OPERATION_NAMES)('%s validates as an operation declaration and its contract as an AIP capability contract', (operation) => {
    const declaration = readContract(operation);
    const validateDeclaration = catalog.validator('connector/operation-declaration.schema.json');
    expect(validateDeclaration(declaration), JSON.stringify(validateDeclaration.errors)).toBe(true);
    expect(declaration.operation).toBe(operation);
    const validateContract = catalog.validator('aip/capability-contract.schema.json');
    expect(validateContract(declaration.contract), JSON.stringify(validateContract.errors)).toBe(true);
  });

  it('the catalog serves the declarations from disk unchanged', () => {
    for (const operation of OPERATION_NAMES) {
      expect(catalog.operations[operation].declaration).toEqual(readContract(operation));
    }
  });

  it('the declaration schema refuses a broken declaration (so the check above can fail)', () => {
    const validate = catalog.validator('connector/operation-declaration.schema.json');
    const broken = { ...readContract('run_status'), risk: 'extreme' };
    expect(validate(broken)).toBe(false);
    const contractValidate = catalog.validator('aip/capability-contract.schema.json');
    expect(contractValidate({ ...(readContract('run_status').contract as object), sla: { async_expected: false, availability_target: 'always' } })).toBe(false);
  });
});

describe.each(OPERATION_NAMES)('%s contract values (API doc table)', (operation) => {
  const expected = TABLE[operation];
  const declaration = catalog.operations[operation].declaration;
  const contract = declaration.contract as Record<string, any>;

  it('http binding and provider timeout', () => {
    expect(declaration.http).toStrictEqual({
      method: expected.method,
      path: expected.path,
      streaming: expected.streaming,
      provider_timeout_ms: expected.providerTimeoutMs,
    });
  });

  it('risk', () => {
    expect(declaration.risk).toBe(expected.risk);
  });

  it('idempotency', () => {
    const idempotency = { requirement: expected.idempotency, collision_behavior: 'return_original_result', key_scope: 'capability' };
    if (expected.idempotency === 'required') expect(contract.idempotency).toStrictEqual({ ...idempotency, ttl_ms: 86_400_000 });
    else expect(contract.idempotency).toMatchObject(idempotency);
  });

  it('sla', () => {
    expect(contract.sla).toMatchObject({ timeout_ms: expected.slaTimeoutMs, max_queue_delay_ms: 10_000, availability_target: '99.9%' });
  });

  it('side effects', () => {
    expect([...contract.side_effects].sort()).toEqual([...expected.sideEffects].sort());
  });

  it('data sensitivity, PII and redaction', () => {
    expect(contract.data).toStrictEqual({ sensitivity: expected.sensitivity, contains_pii: expected.pii, redaction_required: true });
  });

  it('execution flags', () => {
    expect(contract.execution).toMatchObject(expected.execution);
  });

  it('compensation is rollback_not_supported', () => {
    expect(contract.compensation.mode).toBe('rollback_not_supported');
  });

  it(expected.approval ? 'approval by tenant policy, 15 min, with reason/input_snapshot/policy_decision evidence' : 'no AIP approval', () => {
    if (expected.approval) {
      expect(contract.approval).toMatchObject({ required: true, approver_selector: { type: 'tenant_policy' }, ttl_ms: 900_000 });
      expect([...contract.approval.evidence_requirements].sort()).toEqual(['input_snapshot', 'policy_decision', 'reason']);
    } else {
      expect(contract.approval?.required ?? false).toBe(false);
    }
  });
});

describe('operation input schemas', () => {
  const valid = (operation: OperationName, input: unknown) => catalog.operations[operation].validateInput(input);

  const RUN_ID_OPS = ['run_status', 'run_events', 'run_approval', 'run_stop'] as const;
  const withRunId = (operation: (typeof RUN_ID_OPS)[number], run_id: unknown) => (operation === 'run_approval' ? { run_id, choice: 'once' } : { run_id });

  describe.each(RUN_ID_OPS)('%s run_id', (operation) => {
    it.each([
      ['a Hermes run id', 'run_d1d361d6646c4f4db2bf950d124a8fc4'],
      ['512 ASCII characters', 'r'.repeat(512)],
      ['a slash and a question mark (percent-encoded later)', 'a/b?c'],
      ['three dots', '...'],
      ['a dot inside', 'a.b'],
      ['non-ASCII', 'run-é-😀'],
      ['inner spaces', 'run 1'],
    ])('accepts %s', (_name, runId) => {
      expect(valid(operation, withRunId(operation, runId))).toBe(true);
    });

    it.each([
      ['empty', ''],
      ['.', '.'],
      ['..', '..'],
      ['a newline', 'a\nb'],
      ['a carriage return', 'a\rb'],
      ['a tab', 'a\tb'],
      ['NUL', '\u0000'],
      ['DEL', 'a\u007fb'],
      ['a C1 control', 'a\u0085b'],
      ['513 ASCII characters', 'r'.repeat(513)],
      ['a number', 123],
      ['null', null],
    ])('refuses %s', (_name, runId) => {
      expect(valid(operation, withRunId(operation, runId))).toBe(false);
    });

    it('refuses a missing run_id and unknown fields', () => {
      const { run_id: _omit, ...rest } = withRunId(operation, 'r');
      expect(valid(operation, rest)).toBe(false);
      expect(valid(operation, { ...withRunId(operation, 'r'), extra: 1 })).toBe(false);
      expect(valid(operation, 'r')).toBe(false);
      expect(valid(operation, null)).toBe(false);
    });
  });

  describe('run_events max_events', () => {
    it.each([1, 4096, 100_000])('accepts %s', (max_events) => {
      expect(valid('run_events', { run_id: 'r', max_events })).toBe(true);
    });

    it.each([0, -1, 100_001, 1.5, '10', null])('refuses %s', (max_events) => {
      expect(valid('run_events', { run_id: 'r', max_events })).toBe(false);
    });

    it('defaults to 4096 in the schema', () => {
      const schema = catalog.operations.run_events.inputSchema as { properties: { max_events: { default: number } } };
      expect(schema.properties.max_events.default).toBe(4096);
    });
  });

  describe('run_approval choice', () => {
    it.each(['once', 'session', 'always', 'deny', 'approve', 'allow'])('accepts %s', (choice) => {
      expect(valid('run_approval', { run_id: 'r', choice })).toBe(true);
      expect(valid('run_approval', { run_id: 'r', choice, resolve_all: true })).toBe(true);
    });

    it.each(['maybe', 'ONCE', 'yes', '', null, 1])('refuses %s', (choice) => {
      expect(valid('run_approval', { run_id: 'r', choice })).toBe(false);
    });

    it('refuses a missing choice and a non-boolean resolve_all', () => {
      expect(valid('run_approval', { run_id: 'r' })).toBe(false);
      expect(valid('run_approval', { run_id: 'r', choice: 'once', resolve_all: 'yes' })).toBe(false);
    });
  });

  describe('run_start', () => {
    it.each([
      ['a string input', { body: { input: 'Clean the build directory' } }],
      ['a message array', { body: { input: [{ role: 'user', content: 'hi' }] } }],
      [
        'history and a final message',
        {
          body: {
            input: [
              { role: 'system', content: 'be brief' },
              { role: 'user', content: 'hi' },
            ],
          },
        },
      ],
      [
        'every documented body field',
        {
          body: {
            input: 'hi',
            instructions: 'be brief',
            model: null,
            session_id: 'ses_1',
            conversation_history: [{ role: 'user', content: 'earlier' }],
            previous_response_id: 'resp_1',
          },
        },
      ],
      ['an unknown body field (passed through)', { body: { input: 'hi', temperature: 0.2 } }],
      ['a session key', { body: { input: 'hi' }, session_key: 'user-42:project-x' }],
      ['a 256-char session key', { body: { input: 'hi' }, session_key: 's'.repeat(256) }],
      ['a session key with inner spaces', { body: { input: 'hi' }, session_key: 'a b' }],
    ])('accepts %s', (_name, input) => {
      expect(valid('run_start', input)).toBe(true);
    });

    it.each([
      ['an empty string input', { body: { input: '' } }],
      ['an empty array input', { body: { input: [] } }],
      ['a missing input', { body: {} }],
      ['a numeric input', { body: { input: 5 } }],
      ['an array of strings', { body: { input: ['hi'] } }],
      ['a missing body', {}],
      ['a string body', { body: 'hi' }],
      ['an unknown top-level field', { body: { input: 'hi' }, headers: { authorization: 'x' } }],
      ['a session key with CR', { body: { input: 'hi' }, session_key: 'a\rb' }],
      ['a session key with LF', { body: { input: 'hi' }, session_key: 'a\nb' }],
      ['a session key with NUL', { body: { input: 'hi' }, session_key: 'a\u0000b' }],
      ['a 257-char session key', { body: { input: 'hi' }, session_key: 's'.repeat(257) }],
      ['an empty session key', { body: { input: 'hi' }, session_key: '' }],
      ['an empty session_id', { body: { input: 'hi', session_id: '' } }],
      ['a history item without content', { body: { input: 'hi', conversation_history: [{ role: 'user' }] } }],
    ])('refuses %s', (_name, input) => {
      expect(valid('run_start', input)).toBe(false);
    });
  });
});

describe('manifest and capabilities of a two-endpoint connector', () => {
  const connector = createHermesConnector({
    endpoints: [
      { id: 'alpha', baseUrl: LOCAL_BASE_URL, apiKey: TEST_API_KEY, displayName: 'Alpha', tenantId: 'tenant-a' },
      { id: 'beta-2', baseUrl: 'http://127.0.0.1:10', apiKey: TEST_API_KEY, operations: { run_steer: true } },
    ],
  });
  afterAll(() => connector.close());

  const manifest = connector.manifest();
  const capabilities = connector.capabilities();
  // alpha publishes the five; beta-2 opted into run_steer as well.
  const ids = [
    ...OPERATION_NAMES.filter((op) => op !== 'run_steer').map((op) => `cap:hermes_agent:alpha:${op}`),
    ...OPERATION_NAMES.map((op) => `cap:hermes_agent:beta-2:${op}`),
  ];

  it('the manifest validates against aip/manifest.schema.json', () => {
    const validate = catalog.validator('aip/manifest.schema.json');
    expect(validate(manifest), JSON.stringify(validate.errors)).toBe(true);
  });

  it('every capability validates against aip/capability.schema.json', () => {
    const validate = catalog.validator('aip/capability.schema.json');
    for (const capability of capabilities) expect(validate(capability), `${capability.id}: ${JSON.stringify(validate.errors)}`).toBe(true);
  });

  it('lists exactly cap:hermes_agent:<endpoint>:<op>, five per endpoint and six with run_steer, in manifest and capabilities()', () => {
    expect(capabilities.map((c) => c.id).sort()).toEqual([...ids].sort());
    expect(manifest.capabilities.map((c) => c.id).sort()).toEqual([...ids].sort());
    for (const id of ids) expect(connector.capability(id)?.id).toBe(id);
    expect(connector.capability('cap:hermes_agent:gamma:run_start')).toBeUndefined();
    expect(connector.capability('cap:hermes_agent:alpha:run_delete')).toBeUndefined();
    expect(connector.capability('cap:hermes_agent:alpha:run_steer')).toBeUndefined();
  });

  it('binds each capability to its endpoint and Hermes route', () => {
    for (const capability of capabilities) {
      const [, , endpointId, operation] = capability.id.split(':') as [string, string, string, OperationName];
      const expected = TABLE[operation];
      expect(capability.bindings).toStrictEqual([
        {
          profile: 'aip.connector.hermes_agent.v1',
          endpoint_id: endpointId,
          operation,
          method: expected.method,
          path: expected.path,
          streaming: expected.streaming,
        },
      ]);
      expect(capability.kind).toBe('workflow');
      expect(capability.stability).toBe('stable');
      expect(capability.risk).toBe(expected.risk);
      expect(capability.requires_human_approval).toBe(expected.approval);
      expect(capability.contract).toEqual(catalog.operations[operation].declaration.contract);
      expect(capability.input_schema).toEqual(catalog.operations[operation].inputSchema);
      expect(capability.output_schema).toEqual(catalog.operations[operation].outputSchema);
    }
  });

  it('names the pinned Hermes revision, the profile and the endpoints', () => {
    expect(manifest.compatibility.upstream_revision).toBe('7426c09beee73bdff94d916015bac71384f6bc92');
    expect(manifest.profiles).toEqual(['aip.connector.hermes_agent.v1']);
    expect(manifest.compatibility.endpoints).toEqual(['alpha', 'beta-2']);
    expect(manifest.compatibility.tenant_bound_endpoints).toEqual(['alpha']);
  });

  it('has no $ref in any input or output schema that is not a local fragment', () => {
    const refs: string[] = [];
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) node.forEach(walk);
      else if (node !== null && typeof node === 'object') {
        for (const [key, value] of Object.entries(node)) {
          if (key === '$ref') refs.push(String(value));
          walk(value);
        }
      }
    };
    for (const capability of capabilities) {
      walk(capability.input_schema);
      walk(capability.output_schema);
    }
    expect(refs.length).toBeGreaterThan(0);
    expect(refs.filter((ref) => !ref.startsWith('#/'))).toEqual([]);
  });

  describe('implementationSupport', () => {
    const support = (operation: OperationName) => connector.implementationSupport(`cap:hermes_agent:beta-2:${operation}`);

    it.each(OPERATION_NAMES)('%s claims only what is implemented', (operation) => {
      expect(support(operation)).toStrictEqual({
        invocation: true,
        cancellation: operation === 'run_events',
        streaming: operation === 'run_events',
        retry: operation === 'run_status' || operation === 'run_events',
        transaction: false,
        reconciliation: false,
        compensation: false,
        approval: operation === 'run_approval' || operation === 'run_stop' || operation === 'run_steer',
        credentials: false,
      });
    });

    it('is the same for every endpoint that publishes the operation', () => {
      for (const operation of OPERATION_NAMES.filter((op) => op !== 'run_steer')) {
        expect(connector.implementationSupport(`cap:hermes_agent:alpha:${operation}`)).toStrictEqual(support(operation));
      }
    });

    it.each(['cap:hermes_agent:gamma:run_start', 'cap:hermes_agent:alpha:run_delete', '', 'run_start'])('claims nothing for the unknown id %j', (id) => {
      expect(connector.implementationSupport(id)).toStrictEqual({
        invocation: false,
        cancellation: false,
        streaming: false,
        retry: false,
        transaction: false,
        reconciliation: false,
        compensation: false,
        approval: false,
        credentials: false,
      });
    });

    it('claims nothing for run_steer on an endpoint that did not opt into it', () => {
      expect(connector.implementationSupport('cap:hermes_agent:alpha:run_steer')).toStrictEqual(connector.implementationSupport('run_start'));
    });
  });
});
