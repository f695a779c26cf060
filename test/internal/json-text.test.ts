import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonSyntaxProblem, parseJsonText } from '../../src/internal/json-text.js';

const SEED = 20261202;

const parses = (text: string) => {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
};

/** JSON text, then up to three one-character edits with characters that matter to the grammar. */
const GRAMMAR_CHARS = [...'{}[],:"\\-01.e+ \n\t\r\u0001\u001f\u007fuatné', '\ud83d'];
const edited = fc
  .tuple(
    fc.tuple(fc.jsonValue(), fc.constantFrom(0, 2)).map(([value, indent]) => JSON.stringify(value, null, indent)),
    fc.array(fc.tuple(fc.constantFrom('insert', 'delete', 'replace'), fc.nat(), fc.constantFrom(...GRAMMAR_CHARS)), { maxLength: 3 }),
  )
  .map(([text, edits]) =>
    edits.reduce((current, [kind, at, char]) => {
      const index = current.length === 0 ? 0 : at % current.length;
      if (kind === 'insert') return current.slice(0, index) + char + current.slice(index);
      if (kind === 'delete') return current.slice(0, index) + current.slice(index + 1);
      return current.slice(0, index) + char + current.slice(index + 1);
    }, text),
  );

/** Token soup: sequences of JSON tokens and near-tokens, which reach valid text far more often than random characters. */
const TOKENS = ['{', '}', '[', ']', ',', ':', ' ', '"a"', '""', '"\\u00e9"', '"\\uD83D"', '"\\q"', '"\\u12"', '"\u001f"', '"\u007f"', '"\\/"'];
const NUMBERS = ['0', '1', '-0', '-', '01', '1.', '.5', '1.5', '1e', '1e+', '1E-3', '2.5e+10', '-1.0', '00', '+1', '1.e3', '0x1'];
const LITERAL_WORDS = ['true', 'false', 'null', 'nul', 'True', 'NaN', 'Infinity', 'undefined'];
const soup = fc.array(fc.constantFrom(...TOKENS, ...NUMBERS, ...LITERAL_WORDS), { maxLength: 9 }).map((tokens) => tokens.join(''));
/** Structure only: brackets, separators and one value of each kind, so nesting mistakes come up often. */
const structure = fc.array(fc.constantFrom('{', '}', '[', ']', ',', ':', '"a"', '0', 'null'), { maxLength: 10 }).map((tokens) => tokens.join(''));

const PHRASES =
  /^(unexpected character|unexpected end of the text|unterminated string|control character in a string|invalid escape in a string|invalid number|expected a property name in double quotes|expected ':' after a property name|expected ',' or '\}' after a property value|expected ',' or '\]' after an array element|text after the JSON value) at line \d+, column \d+$/;

describe('jsonSyntaxProblem', () => {
  it('finds a problem exactly when JSON.parse refuses the text (edited JSON, token soups, random strings)', () => {
    fc.assert(
      fc.property(fc.oneof(edited, soup, structure, fc.string({ maxLength: 12, unit: fc.constantFrom(...GRAMMAR_CHARS) })), (text) => {
        expect(jsonSyntaxProblem(text) === undefined, JSON.stringify(text)).toBe(parses(text));
      }),
      { seed: SEED, numRuns: 20_000 },
    );
  });

  it('says where and what in fixed words only, never text of the input', () => {
    fc.assert(
      fc.property(edited, (text) => {
        if (parses(text)) return;
        expect(() => parseJsonText(text, (why) => new Error(why))).toThrow(PHRASES);
      }),
      { seed: SEED, numRuns: 2_000 },
    );
    expect(() => parseJsonText('{"a": 1}', () => new Error('not called'))).not.toThrow();
  });

  it.each([
    ['{"run_id": sk_live_123}', 11, 'unexpected character'],
    ['{"a": "x\ny"}', 8, 'control character in a string'],
    ['{"a": "\\q"}', 7, 'invalid escape in a string'],
    ['{"a": "\\u12G4"}', 7, 'invalid escape in a string'],
    ['{"a": "open', 6, 'unterminated string'],
    ['{"a" 1}', 5, "expected ':' after a property name"],
    ['{"a": 1,}', 8, 'expected a property name in double quotes'],
    ['[1 2]', 3, "expected ',' or ']' after an array element"],
    ['{"a": 1 "b": 2}', 8, "expected ',' or '}' after a property value"],
    ['01', 1, 'invalid number'],
    ['1.', 1, 'invalid number'],
    ['-', 0, 'invalid number'],
    ['{"a": [1, 2', 11, 'unexpected end of the text'],
    ['', 0, 'unexpected end of the text'],
    ['{} x', 3, 'text after the JSON value'],
    ['\ufeff{}', 0, 'unexpected character'],
  ])('%j: offset %i, %s', (text, offset, problem) => {
    expect(jsonSyntaxProblem(text)).toMatchObject({ offset, problem });
  });

  it('counts lines and columns from 1, across \\n and \\r\\n', () => {
    expect(jsonSyntaxProblem('{\n  "a": 1,\r\n  "b": x\n}')).toEqual({ offset: 20, line: 3, column: 8, problem: 'unexpected character' });
  });

  it('scans nesting as deep as JSON.parse takes, without recursion', () => {
    const depth = 200_000;
    expect(jsonSyntaxProblem('['.repeat(depth) + ']'.repeat(depth))).toBeUndefined();
    expect(jsonSyntaxProblem(`${'['.repeat(depth)}x${']'.repeat(depth)}`)).toMatchObject({ offset: depth, problem: 'unexpected character' });
  });
});
