import { _, str, type KeywordCxt, type KeywordDefinition } from 'ajv/dist/2020.js';

/** A string's length as JSON Schema counts it: code points, a lone surrogate counting as one (as Ajv counts). */
export function codePoints(text: string): number {
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
  {
    keyword: 'maxLength',
    type: 'string',
    schemaType: 'number',
    error: {
      message: ({ schemaCode }) => str`must NOT have more than ${schemaCode} characters`,
      params: ({ schemaCode }) => _`{limit: ${schemaCode}}`,
    },
    code(cxt: KeywordCxt) {
      const count = cxt.gen.scopeValue('func', { ref: codePoints });
      cxt.fail(_`${cxt.data}.length > ${cxt.schema} && ${count}(${cxt.data}) > ${cxt.schema}`);
    },
  },
  {
    keyword: 'minLength',
    type: 'string',
    schemaType: 'number',
    error: {
      message: ({ schemaCode }) => str`must NOT have fewer than ${schemaCode} characters`,
      params: ({ schemaCode }) => _`{limit: ${schemaCode}}`,
    },
    code(cxt: KeywordCxt) {
      const count = cxt.gen.scopeValue('func', { ref: codePoints });
      cxt.fail(_`${cxt.data}.length < ${2 * (cxt.schema as number)} && ${count}(${cxt.data}) < ${cxt.schema}`);
    },
  },
];
