import { _, type Code, type KeywordCxt, type KeywordDefinition, type Name, str } from 'ajv/dist/2020.js';

/** A string's length as JSON Schema counts it: code points, a lone surrogate counting as one (as Ajv counts). */
function codePoints(text: string): number {
  let count = text.length;
  for (let index = 0; index < text.length - 1; index++) {
    if (isHighSurrogate(text.charCodeAt(index)) && isLowSurrogate(text.charCodeAt(index + 1))) {
      count--;
      index++;
    }
  }
  return count;
}

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff;
const isLowSurrogate = (code: number) => code >= 0xdc00 && code <= 0xdfff;

/**
 * `minLength` and `maxLength` with the same meaning and errors as Ajv's, that count code points
 * only when the UTF-16 length cannot decide: a string has at most `.length` code points and at
 * least half as many. Ajv's counts every string it checks, twice when a schema sets both bounds:
 * on every action, its id and capability id (bench/pipeline-cost.ts). The counter is ours rather than
 * Ajv's `runtime/ucs2length`, a CommonJS module whose default export ESM loaders disagree on.
 */
export const STRING_LENGTH_KEYWORDS: KeywordDefinition[] = [
  lengthKeyword('maxLength', 'more', (text, limit, count) => _`${text}.length > ${limit} && ${count}(${text}) > ${limit}`),
  lengthKeyword('minLength', 'fewer', (text, limit, count) => _`${text}.length < ${2 * limit} && ${count}(${text}) < ${limit}`),
];

/** A keyword that fails when `fails` holds, given the string, the schema's limit and the code point counter. */
function lengthKeyword(
  keyword: 'maxLength' | 'minLength',
  comparison: 'more' | 'fewer',
  fails: (text: Name, limit: number, count: Name) => Code,
): KeywordDefinition {
  return {
    keyword,
    type: 'string',
    schemaType: 'number',
    error: {
      message: ({ schemaCode }) => str`must NOT have ${comparison} than ${schemaCode} characters`,
      params: ({ schemaCode }) => _`{limit: ${schemaCode}}`,
    },
    code(cxt: KeywordCxt) {
      cxt.fail(fails(cxt.data, cxt.schema as number, cxt.gen.scopeValue('func', { ref: codePoints })));
    },
  };
}
