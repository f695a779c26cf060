/**
 * serde_json 1.0.150's own answers (fixtures/aip-vectors/serde-json-floats.jsonl, copied from
 * shared/reference/aip-vectors: 30,000 Hermes-like timestamps, 10,000 doubles across magnitudes, edge cases),
 * reproduced line by line by the emulation the host signs with and the runtime double verifies with.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseWire, plainJson } from '../../../src/host/wire/json.js';
import { OUT_OF_RANGE, readSerdeNumber, reserialiseSerdeNumber, writeSerdeFloat } from '../../../src/host/wire/serde-number.js';

type FloatVector = { sent: string; reference: string } | { sent: string; error: string };

const vectors = readFileSync(new URL('../../../fixtures/aip-vectors/serde-json-floats.jsonl', import.meta.url), 'utf8')
  .split('\n')
  .filter((line) => line !== '')
  .map((line) => JSON.parse(line) as FloatVector);

describe("serde_json's reading of a number, re-serialised", () => {
  it('holds all 40,025 vectors', () => {
    expect(vectors.length).toBe(40_025);
  });

  it('reproduces every vector, line by line', () => {
    const misses: string[] = [];
    for (const vector of vectors) {
      const expected = 'reference' in vector ? vector.reference : OUT_OF_RANGE;
      const actual = reserialiseSerdeNumber(vector.sent);
      if (actual !== expected) misses.push(`${vector.sent}: expected ${expected}, got ${actual}`);
    }
    expect(misses).toEqual([]);
  });

  it('changes about one Hermes timestamp in five (the double rounding the vectors were made to catch)', () => {
    const timestamps = vectors.filter((vector) => /^1[78]\d{8}\.\d+$/.test(vector.sent) && 'reference' in vector);
    const changed = timestamps.filter((vector) => 'reference' in vector && vector.reference !== vector.sent).length;
    expect(timestamps.length).toBeGreaterThanOrEqual(30_000);
    expect(changed / timestamps.length).toBeGreaterThan(0.15);
    expect(changed / timestamps.length).toBeLessThan(0.3);
  });

  it('takes the one-rounding shortcut only where the two roundings agree (random decimals up to 18 digits, 0–25 fraction digits)', () => {
    const twoRoundings = (lexeme: string) => {
      const read = readSerdeNumber(lexeme);
      return read === OUT_OF_RANGE || 'integer' in read ? read : writeSerdeFloat(read.float);
    };
    const misses: string[] = [];
    for (let i = 0; i < 20_000; i++) {
      const digits = String(Math.random())
        .slice(2)
        .padEnd(18, '7')
        .slice(0, 1 + Math.floor(Math.random() * 18));
      const point = Math.floor(Math.random() * Math.min(digits.length, 26));
      const lexeme = `${i % 2 ? '-' : ''}${digits.slice(0, digits.length - point) || '0'}.${digits.slice(digits.length - point) || '0'}`;
      if (reserialiseSerdeNumber(lexeme) !== twoRoundings(lexeme)) misses.push(lexeme);
    }
    expect(misses).toEqual([]);
  });

  it("writes a double's shortest digits, those of toExponential(), and reads back as that double, at every magnitude", () => {
    const misses: string[] = [];
    const bits = new DataView(new ArrayBuffer(8));
    const significantDigits = (text: string) => (text.split(/e/i)[0] as string).replace(/[-.]/g, '').replace(/^0+/, '').replace(/0+$/, '');
    for (let i = 0; i < 20_000; i++) {
      bits.setUint32(0, Math.floor(Math.random() * 0x7ff00000));
      bits.setUint32(4, Math.floor(Math.random() * 0x100000000));
      const n = bits.getFloat64(0) * (i % 2 ? -1 : 1);
      const written = writeSerdeFloat(n);
      if (Number(written) !== n || significantDigits(written) !== significantDigits(n.toExponential())) misses.push(`${n}: ${written}`);
    }
    expect(misses).toEqual([]);
  });

  it('keeps integers that fit u64 (i64 when negative) as integers, and reads the rest as f64', () => {
    const cases: Array<[string, string]> = [
      ['1000', '1000'],
      ['1e3', '1000.0'],
      ['1E+3', '1000.0'],
      ['1.0', '1.0'],
      ['1.50', '1.5'],
      ['-0', '-0.0'],
      ['0', '0'],
      ['-0.0', '-0.0'],
      ['18446744073709551615', '18446744073709551615'],
      ['18446744073709551616', '1.8446744073709552e+19'],
      ['-9223372036854775808', '-9223372036854775808'],
      ['-9223372036854775809', '-9.223372036854776e+18'],
      // Digits past u64 in the integer part raise the exponent; a fraction digit that still fits is kept.
      ['184467440737095516150.5', '1.844674407370955e+20'],
      ['1e-400', '0.0'],
      ['0e999999999999', '0.0'],
    ];
    for (const [lexeme, text] of cases) expect(reserialiseSerdeNumber(lexeme)).toBe(text);
  });

  it('refuses a non-zero number whose exponent overflows, as serde_json does', () => {
    for (const lexeme of ['1e400', '-1e400', '1.7976931348623159e308', '1e2147483648', '1e2147483647']) {
      expect(readSerdeNumber(lexeme)).toBe(OUT_OF_RANGE);
    }
  });
});

describe('parseWire on a number serde_json refuses', () => {
  it("fails the parse in serde_json's words, never reading it as null", () => {
    expect(parseWire('1e400')).toEqual({ error: 'number out of range at line 1 column 5' });
    expect(parseWire('{"a":[true,\n -1e400]}')).toEqual({ error: 'number out of range at line 2 column 7' });
  });

  it("holds the value serde_json read, not JavaScript's reading of the text", () => {
    const parsed = parseWire('{"timestamp":1796300632.7149935,"big":18446744073709551616}');
    if ('error' in parsed) throw new Error(parsed.error);
    expect(plainJson(parsed.tree)).toEqual({ timestamp: 1796300632.7149937, big: 18446744073709552000 });
    expect(parsed.canonical()).toBe('{"big":1.8446744073709552e+19,"timestamp":1796300632.7149937}');
  });
});
