import { Ajv2020 } from 'ajv/dist/2020.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { STRING_LENGTH_KEYWORDS } from '../../src/contract/string-length.js';

/** Ajv with its own minLength/maxLength, the oracle, and Ajv with ours. */
function compile(schema: object, ours: boolean) {
  const ajv = new Ajv2020({ strict: true });
  if (ours) for (const definition of STRING_LENGTH_KEYWORDS) ajv.removeKeyword(definition.keyword as string).addKeyword(definition);
  return ajv.compile(schema);
}

/** Compiled once per schema and side: compiling is what a property run would spend its time on. */
const compiled = new Map<string, ReturnType<typeof compile>>();

function verdicts(schema: object, text: string) {
  return [true, false].map((ours) => {
    const key = `${JSON.stringify(schema)} ${ours}`;
    const validate = compiled.get(key) ?? compiled.set(key, compile(schema, ours)).get(key)!;
    return { valid: validate(text), errors: validate.errors ?? null };
  });
}

/** Strings of BMP characters, surrogate pairs and lone surrogates of either half. */
const mixedText = fc.array(fc.constantFrom('a', 'é', '😀', '\ud83d', '\ude00', '\u0000'), { maxLength: 12 }).map((parts) => parts.join(''));

describe('minLength and maxLength in code points, counted only when the UTF-16 length cannot decide', () => {
  it('agree with Ajv on every string and bound, valid or not, with the same error', () => {
    fc.assert(
      fc.property(mixedText, fc.integer({ min: 0, max: 14 }), fc.constantFrom('minLength', 'maxLength'), (text, bound, keyword) => {
        const [ours, ajvs] = verdicts({ type: 'string', [keyword]: bound }, text);
        expect(ours).toEqual(ajvs);
      }),
      { numRuns: 400 },
    );
  });

  it('count a surrogate pair as one character at both bounds', () => {
    const pairs = '😀'.repeat(3); // 6 UTF-16 units, 3 code points
    expect(compile({ type: 'string', maxLength: 3 }, true)(pairs)).toBe(true);
    expect(compile({ type: 'string', maxLength: 2 }, true)(pairs)).toBe(false);
    expect(compile({ type: 'string', minLength: 4 }, true)(pairs)).toBe(false);
    expect(compile({ type: 'string', minLength: 3 }, true)(pairs)).toBe(true);
  });

  it('report a violation as Ajv does', () => {
    const validate = compile({ type: 'object', properties: { id: { type: 'string', maxLength: 2 } } }, true);
    expect(validate({ id: 'abc' })).toBe(false);
    expect(validate.errors?.[0]).toMatchObject({
      instancePath: '/id',
      keyword: 'maxLength',
      params: { limit: 2 },
      message: 'must NOT have more than 2 characters',
    });
  });
});
