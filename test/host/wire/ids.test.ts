import { describe, expect, it } from 'vitest';
import { correlationId, messageId } from '../../../src/host/wire/ids.js';

describe('ids', () => {
  it('are msg_/corr_ + 32 hex digits of a UUIDv7 (version 7, RFC 4122 variant), unique and time-ordered', () => {
    const ids = Array.from({ length: 600 }, (_, i) => (i % 2 === 0 ? messageId() : correlationId()));
    for (const [i, id] of ids.entries())
      expect(id).toMatch(i % 2 === 0 ? /^msg_[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}$/ : /^corr_[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}$/);
    expect(new Set(ids).size).toBe(ids.length);
    const stamps = ids.map((id) => Number.parseInt(id.split('_')[1]!.slice(0, 12), 16));
    expect(stamps).toEqual([...stamps].sort((a, b) => a - b));
  });
});
