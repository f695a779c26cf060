import { describe, expect, it } from 'vitest';
import { typedId } from '../../src/internal/ids.js';

const UUID_V7_HEX = /^rcpt_([0-9a-f]{12})7[0-9a-f]{3}[89ab][0-9a-f]{15}$/;

describe('typedId', () => {
  it('is the prefix and 32 hex digits of a UUIDv7 whose first 48 bits are the given time in ms', () => {
    for (const now of [0, 1, 1796032842716, 2 ** 48 - 1]) {
      const match = UUID_V7_HEX.exec(typedId('rcpt_', now));
      expect(match).not.toBeNull();
      expect(Number.parseInt(match?.[1] as string, 16)).toBe(now);
    }
    expect(typedId('act_')).toMatch(/^act_[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}$/);
  });

  it('draws every one of its 74 random bits afresh: 10,000 ids in the same millisecond are distinct, and each random digit takes all its values', () => {
    const ids = Array.from({ length: 10_000 }, () => typedId('rcpt_', 1796032842716));
    expect(new Set(ids).size).toBe(ids.length);
    const hex = ids.map((id) => id.slice('rcpt_'.length));
    // Version digit (12) and variant digit (16) aside, every digit after the time is random.
    for (let at = 13; at < 32; at++) {
      const values = new Set(hex.map((digits) => digits[at]));
      expect(values.size, `digit ${at}`).toBe(at === 16 ? 4 : 16);
    }
  });
});
