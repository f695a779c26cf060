import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ProviderJsonRefused, nestedDeeperThan, parseProviderJson } from '../src/provider-json.js';
import { caught } from './helpers/fixtures.js';

const SEED = 20261130;

function depthOf(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0;
  return 1 + Math.max(0, ...Object.values(value as Record<string, unknown>).map(depthOf));
}

describe('nestedDeeperThan', () => {
  it('property: agrees with the depth of the parsed value, strings full of brackets, quotes and backslashes included', () => {
    const text = fc.string({ unit: fc.constantFrom('[', ']', '{', '}', '"', '\\', 'a', 'é'), maxLength: 12 });
    const value = fc.letrec((tie) => ({
      node: fc.oneof({ depthSize: 'small' }, text, fc.integer(), fc.array(tie('node'), { maxLength: 3 }), fc.dictionary(text, tie('node'), { maxKeys: 3 })),
    })).node;
    fc.assert(
      fc.property(value, fc.integer({ min: 0, max: 6 }), (parsed, limit) => {
        expect(nestedDeeperThan(JSON.stringify(parsed), limit)).toBe(depthOf(parsed) > limit);
      }),
      { seed: SEED, numRuns: 2000 },
    );
  });
});

describe('parseProviderJson', () => {
  const SECRET = 'sk_test_secret';

  it('refuses nesting past 256 levels before parsing, and text that is not JSON', () => {
    expect(parseProviderJson(`${'['.repeat(256)}${']'.repeat(256)}`, SECRET)).toBeInstanceOf(Array);
    expect(caught(() => parseProviderJson(`${'['.repeat(257)}${']'.repeat(257)}`, SECRET))).toEqual(new ProviderJsonRefused('too_deep'));
    expect(caught(() => parseProviderJson('{"a": ', SECRET))).toEqual(new ProviderJsonRefused('not_json'));
  });

  it('redacts the key in strings and member names, also behind escapes, and keeps an own "__proto__" member a member', () => {
    const parsed = parseProviderJson(`{"__proto__": "${SECRET}", "k": ["x\\u0073k_test_secret"], "${SECRET}": {"${SECRET}x": 1}}`, SECRET) as Record<string, unknown>;
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
    expect(JSON.stringify(parsed)).toBe('{"__proto__":"[REDACTED]","k":["x[REDACTED]"],"[REDACTED]":{"[REDACTED]x":1}}');
  });

  it('returns the parsed value untouched when the text cannot hold the key', () => {
    expect(parseProviderJson('{"a": ["sk_test"]}', SECRET)).toEqual({ a: ['sk_test'] });
    expect(parseProviderJson('{"a": 1}', undefined)).toEqual({ a: 1 });
  });
});
