import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, parseWire, serdeNumber, wireJson } from '../../../src/host/wire/json.js';
import { readSerdeNumber, reserialiseSerdeNumber, writeSerdeFloat } from '../../../src/host/wire/serde-number.js';

const SEED = 20261202;
const RUNS = { seed: SEED, numRuns: 2000 };

/**
 * serde_json's f64 layout (ryu's `format64` thresholds, with a signed exponent), rebuilt from JavaScript's own shortest digits (String(n)
 * yields the same shortest round-trip digits, laid out by ECMAScript's different thresholds): digits d of length L,
 * point position kk; integral and kk ≤ 16 → "ddd00.0"; 0 < kk ≤ 16 → "dd.dd"; −5 < kk ≤ 0 → "0.000dd"; else "d.ddde±<kk−1>".
 */
function expectedRyu(n: number): string {
  if (n === 0) return Object.is(n, -0) ? '-0.0' : '0.0';
  const sign = n < 0 ? '-' : '';
  const js = String(Math.abs(n));
  const [significand = '', exponentPart] = js.split('e');
  const [whole = '', fractional = ''] = significand.split('.');
  const allDigits = whole + fractional;
  const leadingZeros = allDigits.length - allDigits.replace(/^0+/, '').length;
  const digits = allDigits.replace(/^0+/, '').replace(/0+$/, '');
  const kk = whole.length - leadingZeros + Number(exponentPart ?? 0);
  const integral = kk >= digits.length;
  if (integral && kk <= 16) return `${sign}${digits.padEnd(kk, '0')}.0`;
  if (kk > 0 && kk <= 16) return `${sign}${digits.slice(0, kk)}.${digits.slice(kk)}`;
  if (kk > -5 && kk <= 0) return `${sign}0.${'0'.repeat(-kk)}${digits}`;
  return `${sign}${digits[0]}${digits.length > 1 ? `.${digits.slice(1)}` : ''}e${kk > 0 ? '+' : ''}${kk - 1}`;
}

/** serde_json's escaping, written out: `"`, `\`, \b \f \n \r \t, other controls as lowercase \u00xx, everything else raw. */
function expectedString(text: string): string {
  const named: Record<string, string> = { '"': '\\"', '\\': '\\\\', '\b': '\\b', '\f': '\\f', '\n': '\\n', '\r': '\\r', '\t': '\\t' };
  let out = '"';
  for (const char of text) {
    const code = char.codePointAt(0)!;
    out += named[char] ?? (code < 0x20 ? `\\u${code.toString(16).padStart(4, '0')}` : char);
  }
  return `${out}"`;
}

const utf8Order = (a: string, b: string): number => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

function mustParse(text: string) {
  const parsed = parseWire(text);
  if ('error' in parsed) throw new Error(parsed.error);
  return parsed;
}

describe('serdeNumber', () => {
  it('writes integers in the i64/u64 range as exact digits', () => {
    expect(serdeNumber(0)).toBe('0');
    expect(serdeNumber(-0)).toBe('0');
    expect(serdeNumber(1000)).toBe('1000');
    expect(serdeNumber(2 ** 63)).toBe('9223372036854775808');
    expect(serdeNumber(-(2 ** 63))).toBe('-9223372036854775808');
    expect(serdeNumber(2 ** 64 - 2048)).toBe('18446744073709549568');
    expect(serdeNumber(2 ** 64)).toBe('1.8446744073709552e+19');
    expect(serdeNumber(-(2 ** 63) - 2048)).toBe('-9.223372036854778e+18');
  });

  it('writes other numbers as serde_json writes an f64', () => {
    const cases: Array<[number, string]> = [
      [1.5, '1.5'],
      [0.1, '0.1'],
      [1e21, '1e+21'],
      [1.5e-7, '1.5e-7'],
      [1e-7, '1e-7'],
      [0.00001, '0.00001'],
      [0.000001, '1e-6'],
      [123.456, '123.456'],
      [1e300, '1e+300'],
      [5e-324, '5e-324'],
      [Number.MAX_VALUE, '1.7976931348623157e+308'],
      [-2.5e-5, '-0.000025'],
    ];
    for (const [n, text] of cases) expect(serdeNumber(n)).toBe(text);
    expect(writeSerdeFloat(1)).toBe('1.0');
    expect(writeSerdeFloat(1e15)).toBe('1000000000000000.0');
    expect(writeSerdeFloat(1e16)).toBe('1e+16');
    expect(writeSerdeFloat(1.2345e16)).toBe('1.2345e+16');
    expect(writeSerdeFloat(-0)).toBe('-0.0');
    expect(serdeNumber(Number.NaN)).toBe('null');
    expect(serdeNumber(Number.POSITIVE_INFINITY)).toBe('null');
  });

  it("equals serde_json's layout of the shortest digits, for any double", () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (n) => {
        expect(writeSerdeFloat(n)).toBe(expectedRyu(n));
        if (!Number.isInteger(n) || Math.abs(n) >= 2 ** 63) expect(serdeNumber(n)).toBe(expectedRyu(n));
      }),
      RUNS,
    );
  });

  it('sends a text JavaScript reads back as the same double, and signs what serde_json reads from that text', () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (n) => {
        const text = serdeNumber(n);
        expect(Object.is(JSON.parse(text), n) || (n === 0 && Number.isInteger(n))).toBe(true);
        expect(wireJson([n])).toBe(`[${text}]`);
        expect(canonicalJson([n])).toBe(`[${reserialiseSerdeNumber(text)}]`);
      }),
      RUNS,
    );
  });

  it('signs a Hermes timestamp that serde_json reads one double away as serde_json writes it back', () => {
    // 1796300632.7149935 is a shortest round-trip form; serde_json's two roundings land on the next double.
    const timestamp = 1796300632.7149935;
    expect(wireJson({ timestamp })).toBe('{"timestamp":1796300632.7149935}');
    expect(canonicalJson({ timestamp })).toBe('{"timestamp":1796300632.7149937}');
  });
});

describe('canonicalJson', () => {
  it('orders keys by UTF-8 bytes at every depth, astral characters after BMP private use', () => {
    expect(canonicalJson({ '\u{1F600}': 1, '\uE000': 2, b: { z: 1, a: [{ y: 1, x: 2 }] }, a: null })).toBe(
      '{"a":null,"b":{"a":[{"x":2,"y":1}],"z":1},"\uE000":2,"\u{1F600}":1}',
    );
    // Up to 40 keys: objects of more than 32 members are written by joining rather than appending.
    const keys = fc.uniqueArray(fc.string({ unit: 'grapheme', maxLength: 4 }), { maxLength: 40, size: 'max' });
    fc.assert(
      fc.property(keys, (names) => {
        const object = Object.fromEntries(names.map((name, i) => [name, i]));
        const order = Object.keys(JSON.parse(canonicalJson(object)) as object);
        expect(canonicalJson(object)).toBe(
          `{${[...names]
            .sort(utf8Order)
            .map((name) => `${expectedString(name)}:${object[name]}`)
            .join(',')}}`,
        );
        expect(order.length).toBe(names.length);
      }),
      RUNS,
    );
  });

  it('escapes exactly what serde escapes, every control character included, and leaves non-ASCII raw', () => {
    for (let code = 0; code < 0x80; code++) {
      const char = String.fromCharCode(code);
      expect(canonicalJson(char)).toBe(expectedString(char));
    }
    expect(canonicalJson('\u007f\u0080é\u2028\u{1F600}')).toBe('"\u007f\u0080é\u2028\u{1F600}"');
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), (text) => {
        expect(canonicalJson(text)).toBe(expectedString(text));
        expect(canonicalJson({ [text]: text })).toBe(`{${expectedString(text)}:${expectedString(text)}}`);
      }),
      RUNS,
    );
  });

  it('refuses a lone surrogate, which has no UTF-8 form', () => {
    expect(() => canonicalJson('a\uD800b')).toThrow(TypeError);
    expect(() => canonicalJson({ '\uDC00': 1 })).toThrow(TypeError);
    expect(canonicalJson('\uD83D\uDE00')).toBe('"\u{1F600}"');
  });

  it('skips undefined members and is compact', () => {
    expect(canonicalJson({ b: undefined, a: [1, undefined, 'x'], c: { d: true } })).toBe('{"a":[1,null,"x"],"c":{"d":true}}');
    const wide = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${String(39 - i).padStart(2, '0')}`, i % 3 === 0 ? undefined : i]));
    const kept = Object.entries(wide).filter(([, value]) => value !== undefined);
    expect(canonicalJson(wide)).toBe(JSON.stringify(Object.fromEntries(kept.sort(([a], [b]) => (a < b ? -1 : 1)))));
    expect(wireJson(wide)).toBe(JSON.stringify(wide));
  });
});

describe('wireJson', () => {
  it('keeps insertion order, with the same escaping and numbers', () => {
    expect(wireJson({ z: 1.0, a: { y: 1.5, b: 'é\n' } })).toBe('{"z":1,"a":{"y":1.5,"b":"é\\n"}}');
  });
});

describe('parseWire', () => {
  it('canonicalises from the text, keeping serde’s view of each number lexeme', () => {
    const parsed = mustParse('{"b":1000.0,"a":[1e3,2.0,-0,1.5],"c":{"signature":"x","did":"y"}}');
    expect(parsed.canonical()).toBe('{"a":[1000.0,2.0,-0.0,1.5],"b":1000.0,"c":{"did":"y","signature":"x"}}');
    expect(parsed.canonical([['c', 'signature']])).toBe('{"a":[1000.0,2.0,-0.0,1.5],"b":1000.0,"c":{"did":"y"}}');
    expect(parsed.canonical([], ['c'])).toBe('{"did":"y","signature":"x"}');
    expect(parsed.value).toEqual({ b: 1000, a: [1000, 2, -0, 1.5], c: { signature: 'x', did: 'y' } });
  });

  it('reads what wireJson writes back to the canonical form of the value', () => {
    // (JSON.stringify would not do as the writer: it gives 55981039237865210 for the integer 55981039237865208, which serde keeps as written.)
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(mustParse(wireJson(value)).canonical()).toBe(canonicalJson(value));
      }),
      { seed: SEED, numRuns: 500 },
    );
  });

  it('refuses lone surrogates, escaped or raw, and accepts escaped pairs', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0xd800, max: 0xdfff }), fc.string(), (unit, text) => {
        const escaped = `\\u${unit.toString(16)}`;
        expect(parseWire(`["${text.replace(/["\\]/g, '')}${escaped}"]`)).toHaveProperty('error');
        expect(parseWire(`{"${escaped}":1}`)).toHaveProperty('error');
        expect(parseWire(`["${String.fromCharCode(unit)}"]`)).toHaveProperty('error');
      }),
      { seed: SEED, numRuns: 300 },
    );
    expect(mustParse('["\\ud83d\\ude00"]').value).toEqual(['\u{1F600}']);
  });

  it('refuses what serde refuses: bad grammar, trailing data, raw control characters, nesting past 127', () => {
    for (const text of [
      '',
      '{"a":1,}',
      '[1,]',
      '[01]',
      '[1.]',
      '[.5]',
      '[+1]',
      '[1e]',
      '{"a":1} x',
      '["\u0001"]',
      '["\\x"]',
      '["\\u12"]',
      '["abc',
      '["abc\\"]',
      "{'a':1}",
      '[NaN]',
      '[tru]',
      '{"a" 1}',
      '{1:2}',
      '\u00a0[1]',
    ]) {
      expect(parseWire(text)).toHaveProperty('error');
    }
    expect(mustParse(`${'['.repeat(127)}${']'.repeat(127)}`).canonical()).toBe(`${'['.repeat(127)}${']'.repeat(127)}`);
    expect(parseWire(`${'['.repeat(128)}${']'.repeat(128)}`)).toEqual({ error: 'recursion limit exceeded' });
    expect(parseWire(`${'['.repeat(200_000)}${']'.repeat(200_000)}`)).toHaveProperty('error');
  });

  it('refuses a repeated key, at any depth, even with the same value', () => {
    for (const text of ['{"a":1,"a":2}', '{"a":1,"a":1}', '[{"x":{"k":true,"k":false}}]', '{"\\u0061":1,"a":2}']) {
      expect(parseWire(text), text).toHaveProperty('error');
    }
  });

  it('keeps "__proto__" as data', () => {
    const parsed = mustParse('{"__proto__":{"x":1}}');
    expect(Object.keys(parsed.value as object)).toEqual(['__proto__']);
    expect(parsed.canonical()).toBe('{"__proto__":{"x":1}}');
  });
});

describe('parseWire agrees with JSON.parse on what it accepts', () => {
  it('parses any JSON text JSON.parse parses to the same value (numbers as serde_json reads them), whitespace included', () => {
    /** JSON with `pad` around every structural character (never inside a string). */
    const spaced = (value: unknown, pad: string): string => {
      if (Array.isArray(value)) return `[${pad}${value.map((item) => spaced(item, pad)).join(`${pad},${pad}`)}${pad}]`;
      if (value !== null && typeof value === 'object') {
        const members = Object.entries(value).map(([key, item]) => `${JSON.stringify(key)}${pad}:${pad}${spaced(item, pad)}`);
        return `{${pad}${members.join(`${pad},${pad}`)}${pad}}`;
      }
      return JSON.stringify(value);
    };
    /** JSON.parse's value with each number as serde_json reads its text (JSON.stringify's, as `spaced` writes it). */
    const asSerdeReads = (value: unknown): unknown => {
      if (typeof value === 'number') {
        const read = readSerdeNumber(JSON.stringify(value));
        return typeof read === 'object' && 'float' in read ? read.float : value;
      }
      if (Array.isArray(value)) return value.map(asSerdeReads);
      if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, asSerdeReads(item)]));
      return value;
    };
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom('', ' ', '\n\t', '\r\n '), (value, pad) => {
        const text = `${pad}${spaced(value, pad)}${pad}`;
        expect(mustParse(text).value).toEqual(asSerdeReads(JSON.parse(text)));
      }),
      { seed: SEED, numRuns: 500 },
    );
  });

  it('decodes every escape JSON.parse decodes', () => {
    const escapes = ['\\"', '\\\\', '\\/', '\\b', '\\f', '\\n', '\\r', '\\t', '\\u0000', '\\u00e9', '\\uffff', '\\ud83d\\ude00'];
    for (const escape of escapes) expect(mustParse(`["a${escape}b"]`).value).toEqual(JSON.parse(`["a${escape}b"]`));
  });
});
