import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, MAX_JSON_VALUES, NotPlainJson, plainJsonCopy } from '../../src/internal/plain-json.js';

const SEED = 20261130;

/** The definition plainJsonCopy must match. */
function roundTrip(value: unknown): { value: unknown } | { threw: true } {
  try {
    return { value: JSON.parse(JSON.stringify(value) ?? 'null') as unknown };
  } catch {
    return { threw: true };
  }
}

function copied(value: unknown): { value: unknown } | { threw: true } {
  try {
    return { value: plainJsonCopy(value) };
  } catch (error) {
    expect(error).toBeInstanceOf(NotPlainJson);
    return { threw: true };
  }
}

/** Same values, same own keys in the same order (own "__proto__" included), same prototypes, 0 never -0. */
function expectSameJson(actual: { value: unknown } | { threw: true }, expected: { value: unknown } | { threw: true }): void {
  // node's strict deep equality: vitest's toStrictEqual compares own "constructor" members by reference.
  expect(isDeepStrictEqual(actual, expected), `${JSON.stringify(actual)} vs ${JSON.stringify(expected)}`).toBe(true);
  if ('value' in actual && 'value' in expected) expect(JSON.stringify(actual.value)).toBe(JSON.stringify(expected.value));
}

function reason(value: unknown): string | undefined {
  try {
    plainJsonCopy(value);
    return undefined;
  } catch (error) {
    return (error as NotPlainJson).reason;
  }
}

const exotic = fc.oneof(
  fc.constantFrom<unknown>(
    undefined,
    null,
    -0,
    NaN,
    Infinity,
    -Infinity,
    Symbol('s'),
    () => 1,
    10n,
    new Date(0),
    new Date(NaN),
    /re/g,
    new Map([[1, 2]]),
    new Set([1]),
  ),
  fc.constantFrom<unknown>(Object(1), Object(-0), Object('boxed'), Object(false), Object(10n), Object(Symbol('boxed'))),
  fc.constantFrom<unknown>(
    Object.assign(() => 1, { toJSON: () => 'a function with toJSON' }),
    { toJSON: () => 'from toJSON' },
    { toJSON: (key: string) => `key:${key}` },
    { toJSON: () => undefined },
    { toJSON: () => 10n },
  ),
  fc.constantFrom<unknown>(Object.assign(Object(2), { valueOf: () => 3 }), Object.assign(Object('a'), { toString: () => 'b' })),
  fc.constantFrom<unknown>(
    JSON.parse('{"__proto__": {"polluted": true}, "a": 1}'),
    Object.create(null),
    Object.assign(Object.create({ inherited: 1 }), { own: 2 }),
  ),
  fc.constantFrom<unknown>([, 1, , 2], new Uint8Array([1, 2]), { 2: 'b', 1: 'a', x: 'c' }),
);

const values = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, fc.jsonValue(), exotic, tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 5 }),
  object: fc.dictionary(fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom('__proto__', 'toJSON', 'constructor', '0', '10')), tie('value'), { maxKeys: 5 }),
})).value;

describe('plainJsonCopy is JSON.parse(JSON.stringify(value))', () => {
  it('gives the same value, or throws where the round trip throws, for random values with every JSON oddity', () => {
    fc.assert(
      fc.property(values, (value) => expectSameJson(copied(value), roundTrip(value))),
      { seed: SEED, numRuns: 3000 },
    );
  });

  it('calls toJSON with the member name, the array index as a string, and "" at the top', () => {
    const keys: string[] = [];
    const probe = { toJSON: (key: string) => (keys.push(key), key) };
    const value = { member: probe, list: [0, probe] };
    const expected = roundTrip(Object.assign(probe, {}) && value);
    const seenByRoundTrip = keys.splice(0);
    expect(plainJsonCopy(value)).toStrictEqual((expected as { value: unknown }).value);
    expect(keys).toStrictEqual(seenByRoundTrip);
    expect(keys).toStrictEqual(['member', '1']);
    expect(plainJsonCopy(probe)).toBe('');
  });

  it('reads every property exactly once, as JSON.stringify does', () => {
    let reads = 0;
    const value = Object.defineProperty({}, 'counted', { enumerable: true, get: () => ++reads });
    expect(plainJsonCopy({ a: value, b: [value] })).toStrictEqual({ a: { counted: 1 }, b: [{ counted: 2 }] });
    expect(reads).toBe(2);
  });

  it('keeps an own "__proto__" member as data and never changes the copy\'s prototype', () => {
    const copy = plainJsonCopy(JSON.parse('{"__proto__": {"polluted": true}}')) as Record<string, unknown>;
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.keys(copy)).toStrictEqual(['__proto__']);
    expect((copy as { polluted?: unknown }).polluted).toBeUndefined();
  });

  it('copies a shared (acyclic) object at each place it occurs and refuses a cycle', () => {
    const shared = { n: 1 };
    const copy = plainJsonCopy([shared, shared]) as object[];
    expect(copy).toStrictEqual([{ n: 1 }, { n: 1 }]);
    expect(copy[0]).not.toBe(copy[1]);
    const loop: unknown[] = [];
    loop.push({ loop });
    expect(reason(loop)).toBe('not_json');
  });

  it('refuses what the round trip cannot copy: BigInt, throwing getters and toJSON, revoked proxies', () => {
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    for (const value of [
      { n: 1n },
      Object.defineProperty({}, 'x', {
        enumerable: true,
        get: () => {
          throw new Error('no');
        },
      }),
      {
        toJSON: () => {
          throw new Error('no');
        },
      },
      [proxy],
    ]) {
      expect(roundTrip(value)).toStrictEqual({ threw: true });
      expect(reason(value)).toBe('not_json');
    }
  });
});

describe('plainJsonCopy limits', () => {
  const nested = (levels: number) => {
    let value: unknown = 'leaf';
    for (let level = 0; level < levels; level++) value = { next: value };
    return value;
  };

  it(`copies ${MAX_JSON_DEPTH} levels of nesting and refuses one more`, () => {
    expect(plainJsonCopy(nested(MAX_JSON_DEPTH))).toStrictEqual(nested(MAX_JSON_DEPTH));
    expect(reason(nested(MAX_JSON_DEPTH + 1))).toBe('too_deep');
  });

  it(`copies ${MAX_JSON_VALUES} values and refuses one more, before allocating the copy`, () => {
    expect((plainJsonCopy(new Array(MAX_JSON_VALUES).fill(0)) as unknown[]).length).toBe(MAX_JSON_VALUES);
    expect(reason(new Array(MAX_JSON_VALUES + 1))).toBe('too_large');
    expect(reason({ a: new Array(MAX_JSON_VALUES / 2), b: new Array(MAX_JSON_VALUES / 2) })).toBe('too_large');
    expect(reason(new Array(2 ** 32 - 1))).toBe('too_large');
  });
});
