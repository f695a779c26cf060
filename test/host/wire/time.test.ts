import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fromTimeArray, normaliseRfc3339, parseRfc3339, rfc3339, rfc3339Micros, timeArray } from '../../../src/host/wire/time.js';

const SEED = 20261202;
const MIN_MS = new Date('0000-01-01T00:00:00Z').getTime();
const MAX_MS = new Date('9999-12-31T23:59:59.999Z').getTime();
const anyMs = fc.integer({ min: MIN_MS, max: MAX_MS });

/** The page's own recipe (§5.1): toISOString with trailing fractional zeros trimmed. */
const trimmedIso = (ms: number): string =>
  new Date(ms)
    .toISOString()
    .replace(/(\.\d*?)0+Z$/, '$1Z')
    .replace(/\.Z$/, 'Z');

/** The page's own recipe (§5.2) for the day of the year. */
const dayOfYear = (d: Date): number =>
  Math.floor((Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()) - Date.UTC(d.getUTCFullYear(), 0, 0)) / 86400000);

describe('rfc3339', () => {
  it('writes what the reference re-serialises', () => {
    expect(rfc3339(Date.parse('2026-12-01T21:00:00.120Z'))).toBe('2026-12-01T21:00:00.12Z');
    expect(rfc3339(Date.parse('2026-12-01T21:00:00.000Z'))).toBe('2026-12-01T21:00:00Z');
    expect(rfc3339(Date.parse('2026-12-01T21:00:00.5Z'))).toBe('2026-12-01T21:00:00.5Z');
    expect(rfc3339(Date.parse('2026-12-01T21:00:00.007Z'))).toBe('2026-12-01T21:00:00.007Z');
    expect(rfc3339(MIN_MS)).toBe('0000-01-01T00:00:00Z');
  });

  it('never ends in a fractional zero, matches the trimmed ISO form, and reads back to the same ms', () => {
    fc.assert(
      fc.property(anyMs, (ms) => {
        const text = rfc3339(ms);
        expect(text).not.toMatch(/\.\d*0Z$|\.Z$/);
        expect(text).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/);
        if (ms >= 0) expect(text).toBe(trimmedIso(ms));
        expect(parseRfc3339(text)).toBe(ms);
        expect(normaliseRfc3339(text)).toBe(text);
      }),
      { seed: SEED, numRuns: 5000 },
    );
  });

  it('refuses what it cannot write', () => {
    expect(() => rfc3339(MAX_MS + 1)).toThrow(RangeError);
    expect(() => rfc3339(MIN_MS - 1)).toThrow(RangeError);
    expect(() => rfc3339(1.5)).toThrow(RangeError);
  });
});

describe('rfc3339Micros', () => {
  it('writes microseconds without trailing zeros, as the reference re-serialises them', () => {
    expect(rfc3339Micros(1796032842009136)).toBe('2026-11-30T10:00:42.009136Z');
    expect(rfc3339Micros(1796032842120000)).toBe('2026-11-30T10:00:42.12Z');
    expect(rfc3339Micros(1796032842000000)).toBe('2026-11-30T10:00:42Z');
  });

  it('is a fixed point of the reference normalisation and agrees with rfc3339 on whole milliseconds', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), (micros) => {
        expect(normaliseRfc3339(rfc3339Micros(micros))).toBe(rfc3339Micros(micros));
        expect(rfc3339Micros(Math.floor(micros / 1000) * 1000)).toBe(rfc3339(Math.floor(micros / 1000)));
      }),
    );
  });
});

describe('parseRfc3339', () => {
  it('reads any offset and up to nanoseconds, flooring below the ms', () => {
    const base = Date.parse('2026-12-01T21:00:00Z');
    expect(parseRfc3339('2026-12-01T23:30:00+02:30')).toBe(base);
    expect(parseRfc3339('2026-12-01T20:00:00-01:00')).toBe(base);
    expect(parseRfc3339('2026-12-01t21:00:00.123999999z')).toBe(base + 123);
    expect(parseRfc3339('2026-12-01T21:00:00.1239999999999Z')).toBe(base + 123);
    expect(parseRfc3339('1969-12-31T23:59:59.9995Z')).toBe(-1);
  });

  it('refuses what is not an RFC 3339 date-time', () => {
    for (const text of [
      '2026-12-01',
      '2026-12-01T21:00:00',
      '2026-12-01 21:00:00Z',
      '2026-02-29T00:00:00Z',
      '2026-13-01T00:00:00Z',
      '2026-12-01T24:00:00Z',
      '2026-12-01T21:60:00Z',
      '2026-12-01T21:00:60Z',
      '2026-12-31T23:58:60Z',
      '2026-12-31T23:59:60+01:00',
      '2026-12-01T21:00:00.Z',
      '2026-12-01T21:00:00+24:00',
      '2026-12-01T21:00:00+0200',
      '+02026-12-01T21:00:00Z',
      '2026-12-01T21:00:00Z ',
    ]) {
      expect(parseRfc3339(text), text).toBeUndefined();
    }
    expect(parseRfc3339('2024-02-29T00:00:00Z')).toBe(Date.parse('2024-02-29T00:00:00Z'));
    expect(parseRfc3339('2016-12-31T23:59:60Z')).toBe(Date.parse('2016-12-31T23:59:59.999Z'));
    expect(normaliseRfc3339('2017-01-01T00:59:60+01:00')).toBe('2017-01-01T00:59:59.999999999+01:00');
  });
});

describe('normaliseRfc3339', () => {
  it('is what the time crate writes after reading', () => {
    expect(normaliseRfc3339('2026-12-01t21:00:00.120000000z')).toBe('2026-12-01T21:00:00.12Z');
    expect(normaliseRfc3339('2026-12-01T21:00:00.000000001+02:00')).toBe('2026-12-01T21:00:00.000000001+02:00');
    expect(normaliseRfc3339('2026-12-01T21:00:00-00:00')).toBe('2026-12-01T21:00:00Z');
    expect(normaliseRfc3339('2026-12-01T21:00:00.000+00:00')).toBe('2026-12-01T21:00:00Z');
    expect(normaliseRfc3339('nope')).toBeUndefined();
  });
});

describe('timeArray', () => {
  it('is the 9-integer form of the vectors', () => {
    expect(timeArray(Date.parse('2026-12-01T21:00:30.12Z'))).toEqual([2026, 335, 21, 0, 30, 120000000, 0, 0, 0]);
    expect(fromTimeArray([2026, 335, 21, 0, 30, 500000000, 0, 0, 0])).toBe(Date.parse('2026-12-01T21:00:30.5Z'));
  });

  it('round-trips every ms in a wide range, with the day of the year of the page’s recipe', () => {
    fc.assert(
      fc.property(anyMs, (ms) => {
        const array = timeArray(ms);
        expect(array).toHaveLength(9);
        expect(array.every(Number.isInteger)).toBe(true);
        const date = new Date(ms);
        if (date.getUTCFullYear() >= 100) expect(array[1]).toBe(dayOfYear(date));
        expect(fromTimeArray(array)).toBe(ms);
      }),
      { seed: SEED, numRuns: 5000 },
    );
  });

  it('counts leap days: the last day of a leap year is 366, of a century year not divisible by 400 is 365', () => {
    const lastDay = (year: number) => timeArray(Date.parse(`${year}-12-31T12:00:00Z`))[1];
    expect(lastDay(2024)).toBe(366);
    expect(lastDay(2000)).toBe(366);
    expect(lastDay(2026)).toBe(365);
    expect(lastDay(1900)).toBe(365);
    expect(lastDay(2100)).toBe(365);
    expect(timeArray(Date.parse('2024-03-01T00:00:00Z'))[1]).toBe(61);
    expect(timeArray(Date.parse('2026-03-01T00:00:00Z'))[1]).toBe(60);
    expect(timeArray(MIN_MS)).toEqual([0, 1, 0, 0, 0, 0, 0, 0, 0]);
    expect(timeArray(Date.parse('0004-12-31T00:00:00Z'))[1]).toBe(366);
  });

  it('reads offsets as the time crate does and refuses what it refuses', () => {
    const utc = Date.parse('2026-12-01T21:00:00Z');
    expect(fromTimeArray([2026, 335, 23, 30, 0, 0, 2, 30, 0])).toBe(utc);
    expect(fromTimeArray([2026, 335, 20, 0, 0, 0, -1, 0, 0])).toBe(utc);
    for (const bad of [
      [2026, 366, 0, 0, 0, 0, 0, 0, 0],
      [2026, 0, 0, 0, 0, 0, 0, 0, 0],
      [2026, 335, 24, 0, 0, 0, 0, 0, 0],
      [2026, 335, 21, 0, 0, 1e9, 0, 0, 0],
      [2026, 335, 21, 0, 0, 1.5, 0, 0, 0],
      [2026, 335, 21, 0, 0, 0, 0, 0],
      [2026, 335, 21, 0, 0, 0, 0, 0, 0, 0],
      '2026-12-01T21:00:00Z',
      ['2026', 335, 21, 0, 0, 0, 0, 0, 0],
      null,
    ]) {
      expect(fromTimeArray(bad), JSON.stringify(bad)).toBeUndefined();
    }
    expect(fromTimeArray([2024, 366, 0, 0, 0, 0, 0, 0, 0])).toBe(Date.parse('2024-12-31T00:00:00Z'));
  });
});
