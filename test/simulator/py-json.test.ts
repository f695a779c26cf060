import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { pyFloat, pyJson } from '../../src/simulator/index.js';
import { pyFloatRepr } from '../../src/simulator/hermes/py-json.js';

describe('pyJson (Python json.dumps defaults)', () => {
  it('uses ", " and ": " separators and keeps insertion order', () => {
    expect(pyJson({ b: 1, a: [1, 2, { c: null }], t: true, f: false })).toBe('{"b": 1, "a": [1, 2, {"c": null}], "t": true, "f": false}');
    expect(pyJson([])).toBe('[]');
    expect(pyJson({})).toBe('{}');
  });

  it('escapes like ensure_ascii=True, with lowercase hex and surrogate pairs', () => {
    expect(pyJson('é')).toBe('"\\u00e9"');
    expect(pyJson('⚠️')).toBe('"\\u26a0\\ufe0f"');
    expect(pyJson('😀')).toBe('"\\ud83d\\ude00"');
    expect(pyJson('a"b\\c\n\r\t\b\f')).toBe('"a\\"b\\\\c\\n\\r\\t\\b\\f"');
    expect(pyJson('\u0000\u001f\u007f')).toBe('"\\u0000\\u001f\\u007f"');
    expect(pyJson('/<>')).toBe('"/<>"');
  });

  it('prints floats like Python repr, including a trailing .0 for integral floats', () => {
    expect(pyJson(pyFloat(1751790000))).toBe('1751790000.0');
    expect(pyJson(pyFloat(1796032842.0091949))).toBe('1796032842.0091949');
    expect(pyJson(pyFloat(0.007))).toBe('0.007');
    expect(pyJson(pyFloat(0))).toBe('0.0');
    expect(pyFloatRepr(-0)).toBe('-0.0');
    expect(pyFloatRepr(0.0001)).toBe('0.0001');
    expect(pyFloatRepr(0.00001)).toBe('1e-05');
    expect(pyFloatRepr(1.5e-7)).toBe('1.5e-07');
    expect(pyFloatRepr(1e15)).toBe('1000000000000000.0');
    expect(pyFloatRepr(1e16)).toBe('1e+16');
    expect(pyFloatRepr(1.2345e300)).toBe('1.2345e+300');
    expect(pyFloatRepr(Number.NaN)).toBe('NaN');
    expect(pyFloatRepr(-Infinity)).toBe('-Infinity');
    expect(pyJson(2.5)).toBe('2.5');
  });

  it('prints integral plain numbers as ints', () => {
    expect(pyJson({ input_tokens: 12, resolved: 1 })).toBe('{"input_tokens": 12, "resolved": 1}');
    expect(pyJson(1e21)).toBe('1000000000000000000000');
  });

  it('sorts keys when asked (canonical fingerprints)', () => {
    expect(pyJson({ b: { y: 1, x: 2 }, a: 1 }, { sortKeys: true })).toBe('{"a": 1, "b": {"x": 2, "y": 1}}');
  });

  it('always produces ASCII-only JSON that parses back to the same value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = pyJson(value);
        expect(/^[\x20-\x7e]*$/.test(text)).toBe(true);
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(value)));
      }),
    );
  });

  it('keeps float values exact through repr', () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (value) => {
        expect(Object.is(Number(pyFloatRepr(value)), value)).toBe(true);
      }),
    );
  });
});
