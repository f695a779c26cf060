import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ProviderJsonRefused, nestedDeeperThan, parseProviderJson } from '../../src/transport/provider-json.js';
import { caught } from '../helpers/fixtures.js';

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
    const parsed = parseProviderJson(`{"__proto__": "${SECRET}", "k": ["x\\u0073k_test_secret"], "${SECRET}": {"${SECRET}x": 1}}`, SECRET) as Record<
      string,
      unknown
    >;
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
    expect(JSON.stringify(parsed)).toBe('{"__proto__":"[REDACTED]","k":["x[REDACTED]"],"[REDACTED]":{"[REDACTED]x":1}}');
  });

  it('property: however the provider escapes its JSON strings, no parsed string or member name holds the key', () => {
    // Keys with each character JSON may escape on its own, so that each kind of escape is needed.
    const secretArb = fc.constantFrom('sk_plain~', 'sk_"q', 'sk_\\q', 'sk_/q');
    const textOf = (secret: string) =>
      fc.array(fc.constantFrom(secret, 'sk_', 'é', '\n', 'x', '"', '\\', '/'), { maxLength: 6 }).map((parts) => parts.join(''));
    /** Which characters of string literals to spell as escapes (by character and position). */
    const escapeArb = fc.oneof(
      fc.constant((_char: string, _at: number) => false),
      fc.constant((_char: string, _at: number) => true),
      fc.constant((char: string, _at: number) => char.charCodeAt(0) >= 0x70),
      fc.constant((char: string, _at: number) => char === 's' || char === '/'),
      fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }).map((bits) => (_char: string, at: number) => bits[at % bits.length] as boolean),
    );
    /** JSON.stringify, then the chosen characters of every string spelled as \uXXXX (either case), or `/` as `\/`. */
    const escaped = (value: unknown, escape: (char: string, at: number) => boolean, upper: boolean) =>
      JSON.stringify(value).replace(/"(?:[^"\\]|\\.)*"/g, (literal) => {
        const spelled = [...(JSON.parse(literal) as string)].map((char, at) => {
          if (char.length > 1 || !escape(char, at)) return JSON.stringify(char).slice(1, -1);
          if (char === '/' && upper) return '\\/';
          const hex = char.charCodeAt(0).toString(16).padStart(4, '0');
          return `\\u${upper ? hex.toUpperCase() : hex}`;
        });
        return `"${spelled.join('')}"`;
      });
    fc.assert(
      fc.property(
        secretArb.chain((secret) =>
          fc.tuple(fc.constant(secret), fc.dictionary(textOf(secret), fc.oneof(textOf(secret), fc.array(textOf(secret), { maxLength: 3 })), { maxKeys: 4 })),
        ),
        escapeArb,
        fc.boolean(),
        ([secret, value], escape, upper) => {
          expect(JSON.stringify(parseProviderJson(escaped(value, escape, upper), secret))).not.toContain(JSON.stringify(secret).slice(1, -1));
        },
      ),
      { seed: SEED + 1, numRuns: 1000 },
    );
  });

  it.each([
    ['sk_"q', '"sk_\\"q"'],
    ['sk_\\q', '"sk_\\\\q"'],
    ['sk_/q', '"sk_\\/q"'],
    ['sk_q~', '"sk_q\\u007e"'],
    ['sk_q~', '"sk_q\\u007E"'],
    ['sk_q!', '"sk_q\\u0021"'],
  ])('the key %s spelled only through the escape in %s is redacted', (secret, literal) => {
    expect(parseProviderJson(`{"a": ${literal}}`, secret)).toEqual({ a: '[REDACTED]' });
  });

  it('returns the parsed value untouched when the text cannot hold the key', () => {
    expect(parseProviderJson('{"a": ["sk_test"]}', SECRET)).toEqual({ a: ['sk_test'] });
    expect(parseProviderJson('{"a": 1}', undefined)).toEqual({ a: 1 });
  });
});
