/**
 * Property-based tests at the connector's trust boundary (issue 7, part 1), with fixed seeds
 * (fast-check prints the seed and the shrunk counterexample path on failure):
 *
 * - arbitrary actions and contexts never make invoke()/cancel() reject or throw; each one gets
 *   exactly the code the API doc gives it, and a refused one makes no HTTP request;
 * - any string as run_id is refused locally or reaches the server as exactly one path segment
 *   that decodes back to the same string;
 * - a valid SSE stream split into arbitrary writes (inside multi-byte UTF-8 and CRLF pairs too)
 *   gives exactly the events of the unsplit stream, through a real socket;
 * - random bytes as an SSE body never crash and end as invalid_response or stream_incomplete;
 * - values that are not JSON at all (getters that throw, proxies, BigInt, cycles) are refused
 *   as invalid input too, and never become a rejection or an unhandled rejection.
 */
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  createHermesConnector,
  type AipActionResult,
  type AipStreamChunk,
  type ExecutionContext,
  type HermesConnector,
  type RunEventsOutput,
} from 'aip-connector-hermes-agent';
import { byRoute, respondJson, respondNotFound, respondStatus, sseChunks } from '../helpers/fault-server.js';
import { assertMatches, schemaValidator } from '../helpers/schema-check.js';
import { keyDeltaTextsArb, keyTextArb, redactedItems, releasableCount, splitKeyArb, type OracleEvent } from '../helpers/split-key-oracle.js';
import { splitAt } from '../helpers/split.js';
import {
  ENDPOINT,
  MUTATIONS,
  OPERATIONS,
  PREFIX,
  cap,
  expectError,
  expectOneFinalChunk,
  grantFor,
  nextId,
  prototypeKeys,
  rigFactory,
  validInput,
  type Operation,
} from './support.js';

const SEED = 20261130;
const { rig, server: rigServer } = rigFactory();

/** A small request-body limit, so that generated bodies fall on both sides of it. */
const BODY_LIMIT = 64 * 1024;
const HEADER_VALUE = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;
const MAX_HEADER_VALUE = 16 * 1024;
const KEY_FORMAT = /^[\x21-\x7e]{1,255}$/;
/** Identifiers the ledger stores: no NUL, no lone surrogate (docs/errors.md). */
const STORABLE = /^[^\0\p{Cs}]*$/u;
const FUTURE = Date.now() + 24 * 3600_000;
const PAST = 1_000;
const APPROVAL_TTL_MS = 15 * 60_000;

// ---- the model: what the API doc says each action gets -------------------------------------

type Expected = { kind: 'refused'; code: string } | { kind: 'sent' } | { kind: 'null' };
const refused = (code: string): Expected => ({ kind: 'refused', code });

const validAction = schemaValidator('aip/action.schema.json');
const inputValidators = Object.fromEntries(
  OPERATIONS.map((operation) => [operation, schemaValidator(`operations/${operation}.input.schema.json`)]),
) as unknown as Record<Operation, (value: unknown) => boolean>;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function operationOf(capabilityId: unknown): Operation | undefined {
  return OPERATIONS.find((operation) => cap(operation) === capabilityId);
}

/** `run_id`: the schema, plus well-formed Unicode and at most 512 UTF-8 bytes. */
function runIdAccepted(runId: string): boolean {
  return runId !== '' && runId !== '.' && runId !== '..' && !/\p{Cc}/u.test(runId) && !/\p{Cs}/u.test(runId) && Buffer.byteLength(runId) <= 512;
}

function inputAccepted(operation: Operation, input: unknown): boolean {
  if (!inputValidators[operation](input)) return false;
  const record = input as Record<string, unknown>;
  if (operation !== 'run_start') return runIdAccepted(record.run_id as string);
  const messages = (record.body as Record<string, unknown>).input;
  if (!Array.isArray(messages)) return true;
  const content = (messages[messages.length - 1] as Record<string, unknown>).content;
  return (typeof content === 'string' || Array.isArray(content)) && content.length > 0;
}

/** The ExecutionContext interface of the API doc, checked field by field. */
function contextAccepted(context: unknown): boolean {
  if (context === undefined) return true;
  if (!isRecord(context)) return false;
  for (const field of ['tenantId', 'traceId', 'sessionId']) {
    if (context[field] !== undefined && typeof context[field] !== 'string') return false;
  }
  if (!storableOrNotText(context.tenantId) || !storableOrNotText(context.sessionId)) return false;
  if (!storableOrNotText(readApprovalId(context.approval))) return false;
  const actor = context.actor as Record<string, unknown> | null | undefined;
  if (
    actor !== undefined &&
    (typeof actor !== 'object' || actor === null || typeof actor.principalId !== 'string' || (actor.issuer !== undefined && typeof actor.issuer !== 'string'))
  ) {
    return false;
  }
  if (context.deadline !== undefined && (typeof context.deadline !== 'number' || !Number.isFinite(context.deadline))) return false;
  if (context.signal !== undefined && !(context.signal instanceof AbortSignal)) return false;
  if (context.onChunk !== undefined && typeof context.onChunk !== 'function') return false;
  return true;
}

function storableOrNotText(value: unknown): boolean {
  return typeof value !== 'string' || STORABLE.test(value);
}

/** A grant's approvalId, if reading it does not throw. */
function readApprovalId(grant: unknown): unknown {
  try {
    return (grant as { approvalId?: unknown } | null | undefined)?.approvalId;
  } catch {
    return undefined;
  }
}

function sameJson(a: unknown, b: unknown): boolean {
  try {
    return isDeepStrictEqual(JSON.parse(JSON.stringify(a) ?? 'null'), JSON.parse(JSON.stringify(b) ?? 'null'));
  } catch {
    return false;
  }
}

/** A valid ApprovalGrant for this input (the API doc's list of what makes one invalid). */
function grantAccepted(grant: unknown, input: unknown): boolean {
  if (!isRecord(grant)) return false;
  const now = Date.now();
  const { approvalId, decision, grantedAt, expiresAt, evidence } = grant;
  if (typeof approvalId !== 'string' || approvalId === '' || decision !== 'approved') return false;
  if (typeof grantedAt !== 'number' || typeof expiresAt !== 'number' || !Number.isFinite(grantedAt) || !Number.isFinite(expiresAt)) return false;
  if (grantedAt > now || expiresAt <= now || expiresAt - grantedAt > APPROVAL_TTL_MS) return false;
  if (!isRecord(evidence) || typeof evidence.reason !== 'string' || evidence.reason.trim() === '') return false;
  if (evidence.policyDecision === undefined || evidence.policyDecision === null) return false;
  return 'inputSnapshot' in evidence && sameJson(evidence.inputSnapshot, input);
}

function headerAccepted(value: string | undefined): boolean {
  return value === undefined || (value.length <= MAX_HEADER_VALUE && HEADER_VALUE.test(value));
}

function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function headersAccepted(action: Record<string, unknown>, context: ExecutionContext, operation: Operation): boolean {
  const values = [
    operation === 'run_start' ? ((action.input as Record<string, unknown>).session_key as string | undefined) : undefined,
    context.actor?.principalId,
    context.actor?.issuer,
    context.tenantId,
    context.traceId,
    context.sessionId,
    context.deadline === undefined ? undefined : String(Math.floor(context.deadline)),
  ];
  const chain = action.delegation_chain;
  if (Array.isArray(chain) && chain.length > 0) values.push(asciiJson(chain));
  return values.every(headerAccepted);
}

/**
 * The action as JSON data, as it would arrive in an AIP envelope (the connector judges that, not
 * the host object); undefined when it is not JSON data at all (a throwing getter, a cycle, a BigInt).
 */
function asJson(action: unknown): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(JSON.stringify(action) ?? 'null') as unknown };
  } catch {
    return undefined;
  }
}

/** The action_id a result must carry: the action's id as JSON data, else ''. */
function expectedActionId(action: unknown): string {
  const id = (asJson(action)?.value as { id?: unknown } | null | undefined)?.id;
  return typeof id === 'string' ? id : '';
}

function judge(rawAction: unknown, context: unknown, hostCancellation: boolean): Expected {
  const json = asJson(rawAction);
  if (json === undefined) return refused('invalid_input');
  const action = json.value;
  if (!validAction(action)) return refused('invalid_input');
  const record = action as Record<string, unknown>;
  if (!STORABLE.test(record.id as string)) return refused('invalid_input');
  const operation = operationOf(record.capability_id);
  if (!operation) return refused('unsupported_capability');
  if (!contextAccepted(context)) return refused('invalid_input');
  if (!inputAccepted(operation, record.input)) return refused('invalid_input');
  const key = record.idempotency_key as string | undefined;
  if (key !== undefined && key !== '' && !KEY_FORMAT.test(key)) return refused('invalid_input');
  if (MUTATIONS.includes(operation) && (key === undefined || key === '')) return refused('idempotency_key_required');
  const ctx = (context ?? {}) as ExecutionContext;
  if (!hostCancellation && (operation === 'run_approval' || operation === 'run_stop') && !grantAccepted(ctx.approval, record.input))
    return refused('approval_required');
  if (ctx.signal?.aborted) return refused('cancelled');
  if (ctx.deadline !== undefined && ctx.deadline <= Date.now()) return refused('deadline_exceeded');
  if (operation === 'run_start' && Buffer.byteLength(JSON.stringify((record.input as Record<string, unknown>).body)) > BODY_LIMIT)
    return refused('invalid_input');
  if (!headersAccepted(record, ctx, operation)) return refused('invalid_input');
  return { kind: 'sent' };
}

/** cancel(): a known capability with a string input.run_id becomes run_stop under the host's authority; no run_id is null. */
function judgeCancel(rawAction: unknown, context: unknown): Expected {
  const json = asJson(rawAction);
  if (json === undefined) return judge(rawAction, context, false);
  const action = json.value;
  const candidate = action as Record<string, unknown> | null | undefined;
  // An action id or tenant no ledger could hold is never looked up: the pipeline refuses it.
  const tenantId = isRecord(context) ? context.tenantId : undefined;
  if (!storableOrNotText(candidate?.id) || !storableOrNotText(tenantId)) return judge(action, context, false);
  const operation = operationOf(candidate?.capability_id);
  if (!operation) return judge(action, context, false);
  const runId = (candidate?.input as Record<string, unknown> | null | undefined)?.run_id;
  if (typeof runId !== 'string') return { kind: 'null' };
  const stop: Record<string, unknown> = {
    id: typeof candidate?.id === 'string' ? candidate.id : '',
    capability_id: cap('run_stop'),
    input: { run_id: runId },
    idempotency_key: `aip-cancel-${'0'.repeat(40)}`,
  };
  if (Array.isArray(candidate?.delegation_chain)) stop.delegation_chain = candidate.delegation_chain;
  return judge(stop, context, true);
}

/** Checks one answer against the model: the exact code, and the number of requests it made. */
function expectJudged(result: AipActionResult | null, expected: Expected, requests: number, action: unknown): void {
  if (expected.kind === 'null') {
    expect(result).toBeNull();
    expect(requests).toBe(0);
    return;
  }
  expect(result).not.toBeNull();
  const answer = result as AipActionResult;
  assertMatches('aip/action-result.schema.json', answer);
  expect(answer.action_id).toBe(expectedActionId(action));
  if (expected.kind === 'refused') {
    expect({ code: answer.error?.code, requests }).toEqual({ code: PREFIX + expected.code, requests: 0 });
    expect(answer.status).toBe(expected.code === 'cancelled' ? 'cancelled' : 'failed');
  } else {
    // The fault server answers every request with Hermes' 404.
    expect({ code: answer.error?.code, requests }).toEqual({ code: `${PREFIX}not_found`, requests: 1 });
  }
}

// ---- generators ---------------------------------------------------------------------------

const pollutionKey = fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'valueOf', 'hasOwnProperty', 'toJSON', 'then');
const fieldKey = fc.constantFrom(
  'id',
  'capability_id',
  'input',
  'idempotency_key',
  'delegation_chain',
  'run_id',
  'body',
  'tenantId',
  'actor',
  'deadline',
  'signal',
  'approval',
  'onChunk',
  'traceId',
);
const anyKey = fc.oneof(fc.string({ maxLength: 8 }), pollutionKey, fieldKey);
const anything = fc.anything({
  key: anyKey,
  maxDepth: 3,
  maxKeys: 5,
  withNullPrototype: true,
  withBoxedValues: true,
  withMap: true,
  withSet: true,
  withSparseArray: true,
  withTypedArray: true,
  withDate: true,
});
const huge = fc
  .tuple(fc.constantFrom('a', 'é', '😀', ' ', '/', '%', '\u0000'), fc.integer({ min: 200, max: 200_000 }))
  .map(([char, count]) => char.repeat(count));
const hostileString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom(
    '',
    ' ',
    '.',
    '..',
    '\r\n',
    'a\r\nX-Injected: 1',
    '\u0000',
    '\ud800',
    'é',
    '😀',
    '__proto__',
    'constructor',
    'x'.repeat(255),
    'x'.repeat(256),
    'y'.repeat(513),
  ),
  huge,
);
/** Extra keys for a plain object, prototype-pollution names included (spread, so `__proto__` stays an own key). */
const extraKeys = fc.dictionary(anyKey, anything, { maxKeys: 3 });
const optional = <T>(arbitrary: fc.Arbitrary<T>) => fc.option(arbitrary, { nil: undefined, freq: 2 });

/** Drops undefined fields (absent, not present-undefined), keeping own `__proto__` keys as data. */
function compact(fields: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) {
    if (value !== undefined) Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

const runIdArb = fc.oneof({ weight: 3, arbitrary: fc.constant(`run_${'b'.repeat(32)}`) }, hostileString, anything);

function inputArb(operation: Operation): fc.Arbitrary<unknown> {
  const mutated = (() => {
    switch (operation) {
      case 'run_start':
        return fc
          .record({
            body: fc.oneof(
              {
                weight: 4,
                arbitrary: fc
                  .record({
                    input: fc.oneof(
                      fc.constant<unknown>('hello'),
                      fc.constantFrom<unknown>('', [], [{}], [{ content: '' }], [{ role: 'user', content: 'x' }], [{ content: [] }], 42, null),
                      huge,
                      anything,
                    ),
                    extra: extraKeys,
                  })
                  .map(({ input, extra }) => ({ ...extra, ...compact({ input }) })),
              },
              anything,
            ),
            session_key: optional(hostileString),
            extra: fc.option(extraKeys, { nil: undefined, freq: 4 }),
          })
          .map(({ body, session_key, extra }) => ({ ...(extra ?? {}), ...compact({ body, session_key }) }));
      case 'run_events':
        return fc
          .record({
            run_id: runIdArb,
            max_events: optional(fc.oneof(fc.constantFrom<unknown>(0, 1, 4096, 100_000, 100_001, -1, 1.5, '5', Number.NaN), anything)),
          })
          .map((fields) => compact(fields));
      case 'run_approval':
        return fc
          .record({
            run_id: runIdArb,
            choice: fc.oneof(
              fc.constantFrom<unknown>('once', 'session', 'always', 'deny', 'approve', 'allow', 'approved', 'ONCE', ''),
              hostileString,
              anything,
            ),
            resolve_all: optional(fc.oneof(fc.boolean(), fc.constantFrom<unknown>('true', 1), anything)),
          })
          .map((fields) => compact(fields));
      default:
        return fc
          .record({ run_id: runIdArb, extra: fc.option(extraKeys, { nil: undefined, freq: 4 }) })
          .map(({ run_id, extra }) => ({ ...(extra ?? {}), ...compact({ run_id }) }));
    }
  })();
  return fc.oneof({ weight: 4, arbitrary: mutated }, anything);
}

type GrantChoice = 'valid' | 'denied' | 'expired' | 'too-long' | 'no-reason' | 'other-snapshot' | { hostile: unknown };

const grantArb: fc.Arbitrary<GrantChoice> = fc.oneof(
  { weight: 4, arbitrary: fc.constant<GrantChoice>('valid') },
  fc.constantFrom<GrantChoice>('denied', 'expired', 'too-long', 'no-reason', 'other-snapshot'),
  anything.map((hostile): GrantChoice => ({ hostile })),
);

function buildGrant(choice: GrantChoice, input: unknown): unknown {
  if (typeof choice === 'object') return choice.hostile;
  const grant = grantFor(input) as unknown as Record<string, unknown>;
  const now = Date.now();
  switch (choice) {
    case 'denied':
      return { ...grant, decision: 'denied' };
    case 'expired':
      return { ...grant, grantedAt: now - 20 * 60_000, expiresAt: now - 10 * 60_000 };
    case 'too-long':
      return { ...grant, expiresAt: now + 60 * 60_000 };
    case 'no-reason':
      return { ...grant, evidence: { ...(grant.evidence as object), reason: '  ' } };
    case 'other-snapshot':
      return { ...grant, evidence: { ...(grant.evidence as object), inputSnapshot: { run_id: 'another run' } } };
    default:
      return grant;
  }
}

/** Hostile values for one context field; the others stay valid. */
const contextFieldValues: Record<string, fc.Arbitrary<unknown>> = {
  tenantId: fc.oneof(hostileString, anything),
  traceId: fc.oneof(hostileString, anything),
  sessionId: fc.oneof(hostileString, anything),
  actor: fc.oneof(
    fc.record({ principalId: fc.oneof(hostileString, anything), issuer: optional(fc.oneof(hostileString, anything)) }).map((actor) => compact(actor)),
    anything,
  ),
  deadline: fc.oneof(
    fc.constantFrom<unknown>(FUTURE, PAST, -1, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, String(FUTURE), 1e300),
    anything,
  ),
  signal: fc.oneof(fc.constantFrom<unknown>('fresh', 'aborted'), anything),
  onChunk: fc.oneof(fc.constant<unknown>('function'), anything),
};
const CONTEXT_FIELDS = Object.keys(contextFieldValues);

const validContext = (): Record<string, unknown> => ({
  tenantId: 'tenant-1',
  traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
  sessionId: 'aip-session-1',
  actor: { principalId: 'user:alice', issuer: 'https://issuer.example' },
  deadline: FUTURE,
});

function contextValue(field: string, value: unknown): unknown {
  if (field === 'signal') return value === 'fresh' ? new AbortController().signal : value === 'aborted' ? AbortSignal.abort() : value;
  if (field === 'onChunk') return value === 'function' ? () => undefined : value;
  return value;
}

interface Case {
  operation: Operation;
  action: unknown;
  context: unknown;
}

/** Where the hostile value goes: nowhere, one field of the action or context, or everywhere at once. */
type Target =
  | 'none'
  | 'whole-action'
  | 'id'
  | 'capability'
  | 'input'
  | 'key'
  | 'chain'
  | 'extra'
  | 'whole-context'
  | 'context-field'
  | 'context-extra'
  | 'grant'
  | 'everywhere';

const everywhere = fc.record({
  id: fc.oneof(hostileString, anything),
  capability: fc.oneof(hostileString, anything),
  key: fc.oneof(hostileString, anything),
  chain: fc.oneof(fc.array(anything, { maxLength: 12 }), anything),
  extra: extraKeys,
  context: anything,
});

/**
 * A case built from a valid action and context (key and grant where the operation needs them)
 * with hostile values at one target; `everywhere` puts them in every field at once.
 */
const caseArb: fc.Arbitrary<Case> = fc
  .record({
    operation: fc.constantFrom(...OPERATIONS),
    target: fc.constantFrom<Target>(
      'none',
      'whole-action',
      'id',
      'capability',
      'input',
      'input',
      'key',
      'chain',
      'extra',
      'whole-context',
      'context-field',
      'context-field',
      'context-extra',
      'grant',
      'everywhere',
    ),
    field: fc.constantFrom(...CONTEXT_FIELDS),
  })
  .chain(({ operation, target, field }) =>
    fc
      .record({
        hostile: (() => {
          switch (target) {
            case 'whole-action':
            case 'whole-context':
              return anything;
            case 'id':
              return fc.oneof(hostileString, anything);
            case 'capability':
              return fc.oneof(
                fc.constantFrom<unknown>(cap('run_status', 'other'), cap('run_steer'), 'cap:hermes_agent:hostile:', `${cap('run_status')} `),
                // Not strings, but their JSON is this operation's capability id.
                fc.constantFrom<unknown>(Object(cap(operation)), { toJSON: () => cap(operation) }),
                hostileString,
                anything,
              );
            case 'key':
              return fc.oneof(fc.constantFrom<unknown>(undefined, ''), hostileString, anything);
            case 'chain':
              return fc.oneof(fc.array(anything, { maxLength: 12 }), fc.array(huge, { minLength: 1, maxLength: 1 }), anything);
            case 'extra':
            case 'context-extra':
              return extraKeys;
            case 'context-field':
              return contextFieldValues[field] as fc.Arbitrary<unknown>;
            case 'grant':
              return grantArb;
            case 'everywhere':
              return everywhere;
            default:
              return fc.constant(undefined);
          }
        })() as fc.Arbitrary<unknown>,
        input: target === 'input' || target === 'everywhere' ? inputArb(operation) : fc.constant(undefined),
      })
      .map(({ hostile, input: hostileInput }): Case => {
        if (target === 'whole-action') return { operation, action: hostile, context: undefined };
        const input = target === 'input' || target === 'everywhere' ? hostileInput : validInput(operation);
        const all =
          target === 'everywhere'
            ? (hostile as { id: unknown; capability: unknown; key: unknown; chain: unknown; extra: Record<string, unknown>; context: unknown })
            : undefined;
        const action = {
          ...(target === 'extra' ? (hostile as Record<string, unknown>) : (all?.extra ?? {})),
          ...compact({
            id: target === 'id' ? hostile : all ? all.id : nextId(),
            capability_id: target === 'capability' ? hostile : all ? all.capability : cap(operation),
            input,
            idempotency_key: target === 'key' ? hostile : all ? all.key : MUTATIONS.includes(operation) ? nextId('key') : undefined,
            delegation_chain: target === 'chain' ? hostile : all ? all.chain : [{ principal: 'agent:planner' }],
          }),
        };
        if (target === 'whole-context') return { operation, action, context: hostile };
        if (all) return { operation, action, context: all.context };
        const context: Record<string, unknown> = { ...(target === 'context-extra' ? (hostile as Record<string, unknown>) : {}), ...validContext() };
        if (target === 'context-field')
          Object.defineProperty(context, field, { value: contextValue(field, hostile), enumerable: true, writable: true, configurable: true });
        if (operation === 'run_approval' || operation === 'run_stop') {
          Object.defineProperty(context, 'approval', {
            value: buildGrant(target === 'grant' ? (hostile as GrantChoice) : 'valid', input),
            enumerable: true,
            writable: true,
            configurable: true,
          });
        }
        return { operation, action, context };
      }),
  );

// ---- properties ---------------------------------------------------------------------------

describe('arbitrary actions and contexts', () => {
  let connector: HermesConnector;
  let requests: () => number;
  const prototypeBefore = prototypeKeys();

  beforeEach(async () => {
    ({ connector, requests } = await rig(respondNotFound, { limits: { maxRequestBodyBytes: BODY_LIMIT } }));
  });

  it('invoke() resolves with exactly the documented code; refused actions make no request', async () => {
    await fc.assert(
      fc.asyncProperty(caseArb, async ({ action, context }) => {
        const expected = judge(action, context, false);
        const before = requests();
        const result = await connector.invoke(action as never, context as never);
        expectJudged(result, expected, requests() - before, action);
      }),
      { seed: SEED, numRuns: 600 },
    );
    expect(prototypeKeys()).toEqual(prototypeBefore);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  }, 120_000);

  it('cancel() resolves (a result or null) with exactly the documented code; refused ones make no request', async () => {
    await fc.assert(
      fc.asyncProperty(caseArb, async ({ action, context }) => {
        const expected = judgeCancel(action, context);
        const before = requests();
        const result = await connector.cancel(action as never, context as never);
        expectJudged(result, expected, requests() - before, action);
      }),
      { seed: SEED + 1, numRuns: 400 },
    );
    expect(prototypeKeys()).toEqual(prototypeBefore);
  }, 120_000);

  it('the generators reach every documented refusal and the provider (the property is not vacuous)', () => {
    const seen = new Set<string>();
    for (const { action, context } of fc.sample(caseArb, { seed: SEED, numRuns: 600 })) {
      const expected = judge(action, context, false);
      seen.add(expected.kind === 'refused' ? expected.code : expected.kind);
    }
    expect([...seen].sort()).toEqual([
      'approval_required',
      'cancelled',
      'deadline_exceeded',
      'idempotency_key_required',
      'invalid_input',
      'sent',
      'unsupported_capability',
    ]);
  });
});

describe('cancel() of values that are not actions', () => {
  it.each([[null], [undefined], [42], ['cap:hermes_agent:hostile:run_events'], [[]]])(
    'cancel(%j) answers like invoke(): invalid_input, no request',
    async (action) => {
      const { connector, requests } = await rig(respondNotFound);
      const invoked = await connector.invoke(action as never);
      const cancelled = await connector.cancel(action as never);
      expect(invoked.error?.code).toBe(`${PREFIX}invalid_input`);
      expect(cancelled).not.toBeNull();
      expectError(cancelled as AipActionResult, { code: 'invalid_input', retryable: false, uncertain: false });
      expect(requests()).toBe(0);
    },
  );
});

describe('cancel() never performs the action it cancels', () => {
  // Host objects whose JSON is a known capability id: the connector judges actions as JSON data.
  const disguises: Array<[string, (id: string) => unknown]> = [
    ['a boxed String', (id) => Object(id)],
    ['an object with toJSON', (id) => ({ toJSON: () => id })],
  ];
  const cases = OPERATIONS.flatMap((operation) => disguises.map(([how, disguise]) => [operation, how, disguise] as const));

  it.each(cases)(
    '%s whose capability_id is %s: only POST …/stop may leave, never the operation itself (no approval bypass)',
    async (operation, _how, disguise) => {
      const { connector, server } = await rig(respondJson(200, { run_id: `run_${'d'.repeat(32)}`, status: 'stopping' }));
      const input = operation === 'run_start' ? { body: { input: 'hello' } } : { ...validInput(operation) };
      const action = { id: nextId(), capability_id: disguise(cap(operation)), input, idempotency_key: nextId('key') };
      const result = await connector.cancel(action as never, {});
      expect(server.requests.map((request) => `${request.method} ${request.target}`)).toEqual(
        operation === 'run_start' ? [] : [`POST /v1/runs/run_${'a'.repeat(32)}/stop`],
      );
      if (operation === 'run_start') expect(result).toBeNull();
      else expect(result?.status, JSON.stringify(result?.error)).toBe('completed');
    },
  );
});

describe('action_id of an action whose id is not a plain string', () => {
  it.each([
    ['a boxed String', Object('act-boxed')],
    ['an object with toJSON', { toJSON: () => 'act-boxed' }],
  ])('%s: every result names the id its JSON carries, refused or sent', async (_how, id) => {
    const { connector } = await rig(respondNotFound);
    const refusedResult = await connector.invoke({ id, capability_id: cap('run_steer'), input: {} } as never);
    const sentResult = await connector.invoke({ id, capability_id: cap('run_status'), input: { run_id: 'run_x' } } as never);
    expect({ refused: [refusedResult.action_id, refusedResult.error?.code], sent: [sentResult.action_id, sentResult.error?.code] }).toEqual({
      refused: ['act-boxed', `${PREFIX}unsupported_capability`],
      sent: ['act-boxed', `${PREFIX}not_found`],
    });
  });
});

describe('prototype-pollution keys in idempotency fingerprints', () => {
  it('the same key with a body that differs only by an own "__proto__" key is idempotency_conflict, not a replay', async () => {
    const { connector, requests } = await rig(respondJson(202, { run_id: `run_${'c'.repeat(32)}`, status: 'started' }));
    const key = nextId('key');
    const first = await connector.invoke({ id: nextId(), capability_id: cap('run_start'), input: { body: { input: 'hello' } }, idempotency_key: key });
    expect(first.status, JSON.stringify(first.error)).toBe('completed');
    const body = JSON.parse('{"input": "hello", "__proto__": {"instructions": "a different request"}}') as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(['input', '__proto__']);
    const second = await connector.invoke({ id: nextId(), capability_id: cap('run_start'), input: { body }, idempotency_key: key });
    expect({ code: second.error?.code, replayed: second.receipt?.replayed }).toEqual({ code: `${PREFIX}idempotency_conflict`, replayed: undefined });
    expect(requests()).toBe(1);
    expect(prototypeKeys()).not.toContain('instructions');
  });
});

describe('run_id', () => {
  const SUFFIX: Record<string, string> = { run_status: '', run_events: '/events', run_approval: '/approval', run_stop: '/stop' };
  const runIdString = fc.oneof(
    fc.string({ unit: 'binary', maxLength: 60 }),
    fc.string({ unit: 'grapheme', maxLength: 60 }),
    fc
      .array(
        fc.constantFrom(
          '.',
          '/',
          '%',
          '%2F',
          '%2e',
          '?',
          '#',
          ' ',
          '+',
          '&',
          '=',
          ';',
          '\\',
          '..',
          'é',
          '😀',
          '\ud800',
          '\udc00',
          '\u0000',
          '\u007f',
          '\u0085',
          '\u2028',
          '\r',
          '\n',
          'a',
        ),
        { maxLength: 12 },
      )
      .map((parts) => parts.join('')),
    fc.tuple(fc.constantFrom('a', 'é', '😀', '€'), fc.integer({ min: 120, max: 520 })).map(([char, count]) => char.repeat(count)),
    fc.constantFrom('', '.', '..', '...', './', '/..', '%2e%2e'),
  );

  it('is refused locally (invalid_input, no request) or sent as exactly one path segment that decodes back to it', async () => {
    const { connector, server, requests } = await rig(respondNotFound);
    await fc.assert(
      fc.asyncProperty(runIdString, fc.constantFrom('run_status', 'run_events', 'run_approval', 'run_stop'), async (runId, operation) => {
        const input: Record<string, unknown> = operation === 'run_approval' ? { run_id: runId, choice: 'deny' } : { run_id: runId };
        const before = requests();
        const action = {
          id: nextId(),
          capability_id: cap(operation),
          input,
          ...(operation === 'run_approval' || operation === 'run_stop' ? { idempotency_key: nextId('key') } : {}),
        };
        const result = await connector.invoke(action, { approval: grantFor(input) });
        const sent = server.requests.slice(before);
        if (!runIdAccepted(runId)) {
          expect({ code: result.error?.code, requests: sent.length }).toEqual({ code: `${PREFIX}invalid_input`, requests: 0 });
          return;
        }
        expect({ code: result.error?.code, requests: sent.length }).toEqual({ code: `${PREFIX}not_found`, requests: 1 });
        const target = sent[0]?.target ?? '';
        const suffix = SUFFIX[operation] as string;
        expect(target.startsWith('/v1/runs/')).toBe(true);
        expect(target.endsWith(suffix)).toBe(true);
        const segment = target.slice('/v1/runs/'.length, target.length - suffix.length);
        expect(segment).not.toMatch(/[/?#]/);
        expect(segment).toMatch(/^[\x21-\x7e]+$/);
        expect(decodeURIComponent(segment)).toBe(runId);
      }),
      { seed: SEED + 2, numRuns: 500 },
    );
  }, 120_000);
});

// ---- SSE through a real socket ---------------------------------------------------------------

interface Frame {
  kind: 'event' | 'comment';
  name: string;
  text: string;
  ending: '\n' | '\r\n' | '\r';
  rawUtf8: boolean;
  id: string | null;
}

const sseText = fc
  .array(
    fc.oneof(
      fc.constantFrom('é', '😀', '€', '日本', 'a', ' ', '"', '\\', '\t', '\u2028', '\r', '\n', ':', 'data: '),
      fc.string({ unit: 'grapheme', maxLength: 6 }),
    ),
    { maxLength: 10 },
  )
  .map((parts) => parts.join(''));
const frameArb: fc.Arbitrary<Frame> = fc.record({
  kind: fc.constantFrom<'event' | 'comment'>('event', 'event', 'event', 'comment'),
  name: fc.constantFrom('message.delta', 'tool.started', 'tool.completed', 'reasoning.available', 'approval.request', 'approval.responded'),
  text: sseText,
  ending: fc.constantFrom<'\n' | '\r\n' | '\r'>('\n', '\r\n', '\r'),
  rawUtf8: fc.boolean(),
  id: fc.option(fc.constantFrom('1', '42', 'evt-é'), { nil: null }),
});

/** Python's json.dumps(ensure_ascii=True) escaping, or raw UTF-8 (a later or non-Hermes server). */
function encodeJson(value: unknown, rawUtf8: boolean): string {
  const json = JSON.stringify(value);
  return rawUtf8 ? json : json.replace(/[\u007f-\uffff]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** The stream's bytes and the events a correct reader must report. */
function serializeStream(
  frames: Frame[],
  final: { text: string; ending: Frame['ending'] },
): { bytes: Buffer; events: Array<{ event: string; data: Record<string, unknown>; id?: string }> } {
  let text = '';
  const events: Array<{ event: string; data: Record<string, unknown>; id?: string }> = [];
  frames.forEach((frame, index) => {
    const e = frame.ending;
    if (frame.kind === 'comment') {
      text += `: keepalive ${frame.text.replace(/[\r\n]/g, ' ')}${e}${e}`;
      return;
    }
    const data = { event: frame.name, run_id: 'run_split', timestamp: 1751790000.5 + index, delta: frame.text, text: frame.text };
    if (frame.id !== null) text += `id: ${frame.id}${e}`;
    text += `data: ${encodeJson(data, frame.rawUtf8)}${e}${e}`;
    events.push(frame.id === null ? { event: frame.name, data } : { event: frame.name, data, id: frame.id });
  });
  const done = {
    event: 'run.completed',
    run_id: 'run_split',
    timestamp: 1751790099.25,
    output: final.text,
    usage: { input_tokens: 1, output_tokens: 2, total_tokens: 3 },
  };
  text += `data: ${encodeJson(done, true)}${final.ending}${final.ending}: stream closed\n\n`;
  events.push({ event: 'run.completed', data: done });
  return { bytes: Buffer.from(text, 'utf8'), events };
}

/** Every cut that lands inside a multi-byte UTF-8 sequence or between CR and LF. */
function hardCuts(bytes: Buffer): number[] {
  const cuts: number[] = [];
  for (let i = 1; i < bytes.length; i++) {
    const byte = bytes[i] as number;
    if ((byte & 0xc0) === 0x80 || (bytes[i - 1] === 0x0d && byte === 0x0a)) cuts.push(i);
  }
  return cuts;
}

/** The bytes cut at these points, without empty pieces: each piece is one socket write. */
function writesAt(bytes: Uint8Array, cuts: number[]): Uint8Array[] {
  return splitAt(bytes, cuts).filter((piece) => piece.length > 0);
}

const chunkView = (chunks: AipStreamChunk[]) => chunks.map(({ sequence, kind, data, part }) => ({ sequence, kind, data, part }));

describe('SSE split into arbitrary writes', () => {
  it('yields exactly the events of the unsplit stream (and of the model), also when cut inside UTF-8 sequences and CRLF pairs', async () => {
    const { connector, server, requests } = await rig(respondNotFound);
    const read = async (parts: Uint8Array[]) => {
      server.handle(byRoute({ events: sseChunks(parts), status: respondStatus('completed') }));
      const chunks: AipStreamChunk[] = [];
      const before = requests();
      const result = await connector.invoke(
        { id: nextId(), capability_id: cap('run_events'), input: { run_id: 'run_split' } },
        {
          onChunk: (chunk) => {
            assertMatches('aip/stream-chunk.schema.json', chunk);
            chunks.push(chunk);
          },
        },
      );
      assertMatches('aip/action-result.schema.json', result);
      return { result, chunks, requests: requests() - before };
    };
    await fc.assert(
      fc.asyncProperty(
        fc.array(frameArb, { maxLength: 10 }),
        sseText,
        fc.constantFrom<Frame['ending']>('\n', '\r\n', '\r'),
        fc.oneof(fc.constant<'hard' | 'bytes'>('hard'), fc.constant<'hard' | 'bytes'>('bytes'), fc.array(fc.nat(), { maxLength: 40 })),
        async (frames, finalText, finalEnding, how) => {
          const { bytes, events } = serializeStream(frames, { text: finalText, ending: finalEnding });
          const cuts = how === 'hard' ? hardCuts(bytes) : how === 'bytes' ? Array.from({ length: bytes.length }, (_, i) => i) : how;
          const whole = await read([bytes]);
          const split = await read(writesAt(bytes, cuts));
          expect(whole.result.status, JSON.stringify(whole.result.error)).toBe('completed');
          const output = whole.result.output as { events: unknown[]; text: string; terminal_event: string };
          expect(output.events).toStrictEqual(events);
          expect(output.terminal_event).toBe('run.completed');
          expect({ ...split.result, receipt: undefined, action_id: '' }).toStrictEqual({ ...whole.result, receipt: undefined, action_id: '' });
          expect(chunkView(split.chunks)).toStrictEqual(chunkView(whole.chunks));
          expectOneFinalChunk(split.chunks, 'done');
          expect([whole.requests, split.requests]).toEqual([1, 1]);
        },
      ),
      { seed: SEED + 3, numRuns: 60 },
    );
  }, 120_000);
});

/**
 * The hold-back of a key split across deltas changes nothing but the key: for any stream (deltas
 * cut anywhere from a text holding keys and pieces of keys, other events, `[DONE]`, a bad frame,
 * the bytes cut anywhere into writes, any `max_events`), a connector with the key gives the result
 * and the chunks of a connector whose key is nowhere in the stream (`~`: neither the redaction nor
 * the hold-back ever acts), with the key redacted as the oracle says.
 */
describe('a key split across deltas, through a real socket', () => {
  type Item = OracleEvent | 'DONE' | 'FAULT' | 'COMMENT';
  const event = (name: string, fields: Record<string, unknown>): OracleEvent => ({ event: name, data: { event: name, run_id: 'run_1', ...fields } });
  const itemsArb = (key: string): fc.Arbitrary<Item[]> =>
    fc
      .array(
        fc.oneof(
          { weight: 5, arbitrary: keyDeltaTextsArb(key).map((texts) => texts.map((delta) => event('message.delta', { delta }))) },
          { weight: 1, arbitrary: keyTextArb(key).map((text) => [event('tool.started', { output: text })]) },
          { weight: 1, arbitrary: fc.constantFrom<Item[]>(['DONE'], ['COMMENT'], [event('run.completed', { output: 'done' })]) },
        ),
        { maxLength: 8 },
      )
      .chain((groups) => fc.boolean().map((fault) => [...groups.flat(), ...(fault ? ['FAULT' as const] : [])]));
  const frameOf = (item: Item) =>
    item === 'DONE'
      ? 'data: [DONE]\n\n'
      : item === 'FAULT'
        ? 'data: {not json}\n\n'
        : item === 'COMMENT'
          ? ': keepalive\n\n'
          : `data: ${JSON.stringify(item.data)}\n\n`;
  const partOf = (item: OracleEvent) => {
    const text = item.data.delta ?? item.data.output;
    return typeof text === 'string' && text !== '' ? { type: 'text', text } : undefined;
  };

  /** The index of the item where a reader stops (a terminal event, `[DONE]`, the max_events-th event); undefined if none. */
  const stopOf = (decoded: Item[], maxEvents: number) => {
    let events = 0;
    const index = decoded.findIndex((item) => item === 'DONE' || (typeof item !== 'string' && (++events === maxEvents || item.event === 'run.completed')));
    return index === -1 ? undefined : index;
  };

  it('property: the events, chunks and max_events cut are those of the stream without a key, but for the key', async () => {
    const server = await rigServer(respondNotFound);
    const read = async (apiKey: string, writes: Uint8Array[], maxEvents: number, holdOpen: boolean) => {
      server.handle(byRoute({ events: sseChunks(writes, { holdOpen }), status: respondStatus('running') }));
      const connector = createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: server.url, apiKey }] });
      try {
        const chunks: AipStreamChunk[] = [];
        const input = { run_id: 'run_1', max_events: maxEvents };
        // The deadline only guards against a reader that waits for the end of a stream held open.
        const context = { deadline: Date.now() + 10_000, onChunk: (chunk: AipStreamChunk) => void chunks.push(chunk) };
        const result = await connector.invoke({ id: nextId(), capability_id: cap('run_events'), input }, context);
        return { result: { ...result, action_id: '', receipt: undefined }, chunks: chunkView(chunks) };
      } finally {
        await connector.close();
      }
    };
    await fc.assert(
      fc.asyncProperty(
        splitKeyArb.chain((key) =>
          fc.record({ key: fc.constant(key), items: itemsArb(key), cuts: fc.array(fc.nat(), { maxLength: 10 }), maxEvents: fc.integer({ min: 1, max: 30 }) }),
        ),
        async ({ key, items, cuts, maxEvents }) => {
          const writes = writesAt(Buffer.from(items.map(frameOf).join('')), cuts);
          const fault = items.includes('FAULT');
          const decoded = items.slice(0, fault ? items.indexOf('FAULT') : items.length).filter((item) => item !== 'COMMENT');
          const stop = stopOf(decoded, maxEvents);
          // Where reading stops (max_events, a terminal event, [DONE], a fault) the server holds the
          // stream open: the reader must get there without the stream's end. With the key, unless the
          // deltas held at the end of the bytes hold the item it stops at: then the server ends the stream.
          const plain = await read('~~~~~~~~', writes, maxEvents, fault || stop !== undefined);
          const keyed = await read(key, writes, maxEvents, fault || (stop !== undefined && releasableCount(decoded, key) > stop));
          const isEvent = (item: Item): item is OracleEvent => typeof item !== 'string';
          const streamEvents = decoded.filter(isEvent);
          const plainOutput = plain.result.output as RunEventsOutput;
          const cut = plainOutput.events.length;
          // Without a key, the events are the stream's, cut where reading stopped.
          expect(plainOutput.events).toEqual(streamEvents.slice(0, cut));
          // [DONE] ends a run of deltas as any other item does.
          const events = redactedItems(decoded, key).filter(isEvent).slice(0, cut);
          const text = events
            .flatMap((item) => (item.event === 'message.delta' ? [item.data.delta as string] : []))
            .join('')
            .replaceAll(key, '[REDACTED]');
          expect(keyed.result).toEqual({
            ...plain.result,
            output: { ...plainOutput, events, text },
            message: plain.result.message && [{ type: 'text', text }],
          });
          expect(keyed.chunks).toEqual(
            plain.chunks.map((chunk, index) => {
              const expected = events[index];
              if (expected === undefined || (chunk.data as { hermes_sse?: unknown } | undefined)?.hermes_sse === undefined) return chunk;
              expect(chunk.part).toEqual(partOf(plainOutput.events[index] as OracleEvent));
              return { ...chunk, data: { hermes_sse: expected }, part: partOf(expected) };
            }),
          );
        },
      ),
      { seed: SEED + 6, numRuns: 100 },
    );
  }, 120_000);
});

/**
 * Reading stops where the stream's end is decided (a terminal event, `[DONE]`, `max_events`), so
 * whatever follows in the same bytes (a bad frame, bytes that are not UTF-8, a frame over the frame
 * limit, bytes past the stream limit) must not change the result, however the network cuts them.
 */
describe('bytes after the end of reading', () => {
  const LIMITS = { maxSseFrameBytes: 1024, maxStreamResponseBytes: 16 * 1024 };
  const endArb = fc.constantFrom('run.completed', 'run.failed', 'run.cancelled', '[DONE]', 'max_events');
  const trailing = fc.oneof(
    fc.constantFrom('data: nope\n\n', 'data: [1]\n\n', 'data: {"delta": "x"}\n\n', 'data:\n\n').map((text) => Buffer.from(text)),
    fc.constant(Buffer.of(0xff, 0xfe, 0x0a, 0x0a)),
    fc.constant(Buffer.from(`data: {"event": "message.delta", "delta": "${'z'.repeat(2 * LIMITS.maxSseFrameBytes)}"}\n\n`)),
    fc.constant(Buffer.from(`: ${'k'.repeat(1000)}\n\n`.repeat(20))),
    fc.uint8Array({ minLength: 1, maxLength: 64 }).map((bytes) => Buffer.from(bytes)),
  );

  /** The result and chunks of one run_events read of these writes, without what differs per call. */
  async function readWith(
    { connector, server }: { connector: HermesConnector; server: { handle(handler: ReturnType<typeof byRoute>): void } },
    writes: Uint8Array[],
    maxEvents?: number,
  ) {
    server.handle(byRoute({ events: sseChunks(writes), status: respondStatus('running') }));
    const chunks: AipStreamChunk[] = [];
    const input = maxEvents === undefined ? { run_id: 'run_tail' } : { run_id: 'run_tail', max_events: maxEvents };
    const result = await connector.invoke({ id: nextId(), capability_id: cap('run_events'), input }, { onChunk: (chunk) => void chunks.push(chunk) });
    assertMatches('aip/action-result.schema.json', result);
    return { result: { ...result, action_id: '', receipt: undefined }, chunks: chunkView(chunks) };
  }

  it('a bad frame in the same network read as run.completed does not turn it into invalid_response', async () => {
    const rigged = await rig(respondNotFound);
    const body = Buffer.from('data: {"event": "message.delta", "delta": "hi"}\n\ndata: {"event": "run.completed", "output": "hi"}\n\ndata: nope\n\n');
    const whole = await readWith(rigged, [body]);
    const split = await readWith(rigged, writesAt(body, [body.indexOf('data: nope')]));
    expect([whole.result.status, split.result.status]).toEqual(['completed', 'completed']);
    expect(whole).toStrictEqual(split);
  });

  it('property: every split of the same bytes gives the same result, decided by what came before the trailing bytes', async () => {
    const rigged = await rig(respondNotFound, { limits: LIMITS });
    const expected = {
      'run.completed': 'completed',
      'run.cancelled': 'cancelled',
      'run.failed': 'stream_failed',
      '[DONE]': 'stream_incomplete',
      max_events: 'stream_truncated',
    };
    await fc.assert(
      fc.asyncProperty(
        fc.array(frameArb, { maxLength: 5 }),
        endArb,
        fc.array(trailing, { minLength: 1, maxLength: 3 }),
        fc.array(fc.nat(), { maxLength: 12 }),
        async (frames, end, tail, cuts) => {
          const { bytes: stream, events } = serializeStream(frames, { text: 'done', ending: '\n' });
          // serializeStream ends with run.completed and a comment: put the chosen end of reading there instead.
          const head = stream.subarray(0, stream.lastIndexOf('data: {"event":"run.completed"'));
          const ending =
            end === '[DONE]'
              ? 'data: [DONE]\n\n'
              : end === 'max_events'
                ? 'data: {"event": "message.delta", "delta": "last"}\n\n'
                : `data: {"event": "${end}"}\n\n`;
          const bytes = Buffer.concat([head, Buffer.from(ending), ...tail]);
          const maxEvents = end === 'max_events' ? events.length : undefined;
          const whole = await readWith(rigged, [bytes], maxEvents);
          const split = await readWith(rigged, writesAt(bytes, cuts), maxEvents);
          expect(whole.result.error?.code ?? whole.result.status).toBe(end.startsWith('run.c') ? expected[end] : PREFIX + expected[end]);
          expect(split).toStrictEqual(whole);
        },
      ),
      { seed: SEED + 5, numRuns: 150 },
    );
  }, 120_000);
});

/**
 * What a body of noise must end as, from the SSE rules alone (WHATWG event stream parsing plus
 * the API doc's framing rules), whatever the split: invalid_response when it holds bytes that are
 * not UTF-8 (a truncated last character aside: that is a cut stream) or a dispatched frame whose
 * data is not a JSON object with an event name; otherwise stream_incomplete (noise holds no
 * terminal event). Undefined when a `[DONE]` may have ended the stream before the trouble.
 */
function expectedNoiseOutcome(bytes: Buffer): 'invalid_response' | 'stream_incomplete' | undefined {
  if (bytes.includes('[DONE]')) return undefined;
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes, { stream: true });
  } catch {
    return 'invalid_response';
  }
  const lines = text.split(/\r\n|\r|\n/);
  lines.pop(); // the last line has no terminator: never dispatched
  let data: string[] = [];
  let eventType: string | undefined;
  for (const line of lines) {
    if (line === '') {
      if (data.length > 0 && !frameAccepted(data.join('\n'), eventType)) return 'invalid_response';
      data = [];
      eventType = undefined;
      continue;
    }
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + (line[colon + 1] === ' ' ? 2 : 1));
    if (field === 'data') data.push(value);
    else if (field === 'event') eventType = value === '' ? undefined : value;
  }
  return 'stream_incomplete';
}

function frameAccepted(data: string, eventType: string | undefined): boolean {
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    return false;
  }
  if (!isRecord(parsed)) return false;
  const name = eventType ?? parsed.event ?? parsed.type;
  return typeof name === 'string' && name !== '';
}

describe('random bytes as an SSE body', () => {
  const token = fc
    .constantFrom(
      'data: ',
      'data:',
      'data',
      'event: ',
      'event:x',
      'id: ',
      'retry: x',
      ': keepalive',
      '{',
      '}',
      '[',
      ']',
      '"event"',
      '"delta"',
      '"type"',
      '"run.status"',
      ':',
      ',',
      '[DONE]',
      '\n',
      '\r',
      '\r\n',
      '\n\n',
      'é',
      '😀',
      'null',
      '1',
      ' ',
    )
    .map((text) => Buffer.from(text));
  const hostileBytes = fc.oneof(
    fc.uint8Array({ maxLength: 600 }),
    // SSE-looking tokens mixed with raw bytes (mostly not UTF-8)...
    fc.array(fc.oneof(token, fc.uint8Array({ minLength: 1, maxLength: 3 })), { maxLength: 80 }).map((parts) => Buffer.concat(parts)),
    // ...and line-shaped noise: a field, JSON-ish tokens, a line ending (valid UTF-8: only the framing decides).
    fc
      .array(
        fc.tuple(
          fc.constantFrom('data: ', 'data:', 'event: ', 'id: ', ': ', 'retry: ', ''),
          fc.array(fc.constantFrom('{', '}', '[', ']', '"event"', '"type"', '"delta"', '"run.status"', '"é😀"', ':', ',', 'null', '1', ' '), { maxLength: 7 }),
          fc.constantFrom('\n', '\r\n', '\r', '\n\n', '\r\n\r\n', '\r\r'),
        ),
        { minLength: 1, maxLength: 14 },
      )
      .map((lines) => Buffer.from(lines.map(([field, value, ending]) => `${field}${value.join('')}${ending}`).join(''))),
  );

  it('never crash the reader: the call ends as invalid_response or stream_incomplete with exactly one final chunk', async () => {
    const { connector, server, requests } = await rig(respondNotFound);
    await fc.assert(
      fc.asyncProperty(hostileBytes, fc.array(fc.nat(), { maxLength: 20 }), async (bytes, cuts) => {
        server.handle(byRoute({ events: sseChunks(writesAt(bytes, cuts)), status: respondStatus('running') }));
        const chunks: AipStreamChunk[] = [];
        const before = requests();
        const result = await connector.invoke(
          { id: nextId(), capability_id: cap('run_events'), input: { run_id: 'run_noise' } },
          { onChunk: (chunk) => void chunks.push(chunk) },
        );
        assertMatches('aip/action-result.schema.json', result);
        expect(result.status).toBe('failed');
        expect([`${PREFIX}invalid_response`, `${PREFIX}stream_incomplete`]).toContain(result.error?.code);
        // The exact outcome, wherever the bytes were split: see expectedNoiseOutcome.
        const expected = expectedNoiseOutcome(Buffer.from(bytes));
        if (expected !== undefined) expect(result.error?.code).toBe(PREFIX + expected);
        expectOneFinalChunk(chunks, 'error');
        // An incomplete stream is reconciled with one status read; a refused one is not.
        expect(requests() - before).toBe(result.error?.code === `${PREFIX}stream_incomplete` ? 2 : 1);
      }),
      { seed: SEED + 4, numRuns: 200 },
    );
  }, 120_000);
});

// ---- values that are not JSON at all ----------------------------------------------------------

function throwing(message = 'hostile getter'): never {
  throw new Error(message);
}
const hostileProxy = () =>
  new Proxy(
    {},
    {
      get: () => throwing('proxy get'),
      has: () => throwing('proxy has'),
      ownKeys: () => throwing('proxy ownKeys'),
      getOwnPropertyDescriptor: () => throwing('proxy descriptor'),
      getPrototypeOf: () => throwing('proxy prototype'),
    },
  );
const withGetter = (fields: Record<string, unknown>, name: string) => Object.defineProperty({ ...fields }, name, { get: () => throwing(), enumerable: true });
const cycle = () => {
  const node: Record<string, unknown> = { name: 'loop' };
  node.self = node;
  return node;
};
/** Arrays `levels` deep: the body itself sits at depth 3 of the action. */
const nested = (levels: number) => {
  let value: unknown = 'leaf';
  for (let level = 0; level < levels; level++) value = [value];
  return value;
};
const startAction = (body: Record<string, unknown>) => ({
  id: nextId(),
  capability_id: cap('run_start'),
  input: { body: { input: 'hello', ...body } },
  idempotency_key: nextId('key'),
});
const statusAction = (extra: Record<string, unknown> = {}) => ({ id: nextId(), capability_id: cap('run_status'), input: { run_id: 'run_x' }, ...extra });
const stopWithSnapshot = (snapshot: unknown) => {
  const input = { run_id: 'run_x' };
  const grant = grantFor(input);
  return {
    action: { id: nextId(), capability_id: cap('run_stop'), input, idempotency_key: nextId('key') },
    context: { approval: { ...grant, evidence: { ...grant.evidence, inputSnapshot: snapshot } } },
  };
};

interface PoisonCase {
  name: string;
  mode: 'invoke' | 'cancel';
  build: () => { action: unknown; context?: unknown };
  code: string;
}

const POISON: PoisonCase[] = [
  { name: 'the action is a Proxy whose every trap throws', mode: 'invoke', build: () => ({ action: hostileProxy() }), code: 'invalid_input' },
  {
    name: 'action.id is a getter that throws',
    mode: 'invoke',
    build: () => ({ action: withGetter({ capability_id: cap('run_status'), input: { run_id: 'run_x' } }, 'id') }),
    code: 'invalid_input',
  },
  {
    name: 'cancel(): action.capability_id is a getter that throws',
    mode: 'cancel',
    build: () => ({ action: withGetter({ id: nextId(), input: { run_id: 'run_x' } }, 'capability_id') }),
    code: 'invalid_input',
  },
  { name: 'cancel(): the action is a Proxy whose every trap throws', mode: 'cancel', build: () => ({ action: hostileProxy() }), code: 'invalid_input' },
  {
    name: 'action.input is a getter that throws',
    mode: 'invoke',
    build: () => ({ action: withGetter({ id: nextId(), capability_id: cap('run_status') }, 'input') }),
    code: 'invalid_input',
  },
  {
    name: 'input.run_id is a getter that throws',
    mode: 'invoke',
    build: () => ({ action: statusAction({ input: withGetter({}, 'run_id') }) }),
    code: 'invalid_input',
  },
  { name: 'run_start body holds a BigInt', mode: 'invoke', build: () => ({ action: startAction({ budget: 10n }) }), code: 'invalid_input' },
  { name: 'run_start body holds a cycle', mode: 'invoke', build: () => ({ action: startAction({ metadata: cycle() }) }), code: 'invalid_input' },
  {
    name: 'run_start body holds a toJSON that throws',
    mode: 'invoke',
    build: () => ({ action: startAction({ metadata: { toJSON: () => throwing('toJSON') } }) }),
    code: 'invalid_input',
  },
  { name: 'run_start body nested 1001 levels deep', mode: 'invoke', build: () => ({ action: startAction({ metadata: nested(1001) }) }), code: 'invalid_input' },
  {
    name: 'run_start body holds a sparse array of length 2^32-1',
    mode: 'invoke',
    build: () => ({ action: startAction({ metadata: new Array(2 ** 32 - 1) }) }),
    code: 'invalid_input',
  },
  { name: 'delegation_chain holds a cycle', mode: 'invoke', build: () => ({ action: statusAction({ delegation_chain: [cycle()] }) }), code: 'invalid_input' },
  {
    name: 'delegation_chain holds a BigInt',
    mode: 'invoke',
    build: () => ({ action: statusAction({ delegation_chain: [{ issued: 1n }] }) }),
    code: 'invalid_input',
  },
  {
    name: 'the context is a Proxy whose every trap throws',
    mode: 'invoke',
    build: () => ({ action: statusAction(), context: hostileProxy() }),
    code: 'invalid_input',
  },
  {
    name: 'context.deadline is a getter that throws',
    mode: 'invoke',
    build: () => ({ action: statusAction(), context: withGetter({}, 'deadline') }),
    code: 'invalid_input',
  },
  { name: 'the approval snapshot is a cycle', mode: 'invoke', build: () => stopWithSnapshot(cycle()), code: 'approval_required' },
  { name: 'the approval snapshot holds a BigInt', mode: 'invoke', build: () => stopWithSnapshot({ run_id: 'run_x', n: 1n }), code: 'approval_required' },
  {
    name: 'the approval snapshot has an extra own "__proto__" key (it differs from the input)',
    mode: 'invoke',
    build: () => stopWithSnapshot(JSON.parse('{"run_id": "run_x", "__proto__": {"run_id": "run_x"}}')),
    code: 'approval_required',
  },
];

describe('values that are not JSON (getters that throw, proxies, BigInt, cycles)', () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => void unhandled.push(reason);
  beforeAll(() => void process.on('unhandledRejection', onUnhandled));
  afterAll(() => void process.off('unhandledRejection', onUnhandled));

  it.each(POISON.map((poison) => [poison.name, poison] as const))(
    '%s: resolves with the documented code, no request, no unhandled rejection',
    async (_name, poison) => {
      const { connector, requests } = await rig(respondNotFound);
      unhandled.length = 0;
      const { action, context } = poison.build();
      const call =
        poison.mode === 'invoke' ? () => connector.invoke(action as never, context as never) : () => connector.cancel(action as never, context as never);
      let settled: { resolved: AipActionResult | null } | { rejected: string };
      try {
        settled = { resolved: await call() };
      } catch (error) {
        settled = { rejected: String(error) };
      }
      // Give a derived promise the turns it needs to surface as an unhandled rejection.
      for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setImmediate(resolve));
      expect({ settled: 'resolved' in settled ? 'resolved' : settled.rejected, unhandled: unhandled.map(String) }).toEqual({
        settled: 'resolved',
        unhandled: [],
      });
      const result = (settled as { resolved: AipActionResult | null }).resolved;
      expect(result).not.toBeNull();
      expectError(result as AipActionResult, { code: poison.code, retryable: false, uncertain: false });
      expect(requests()).toBe(0);
    },
  );
});
