import { randomFillSync } from 'node:crypto';

/** Random bytes for 256 ids, refilled when used up: one CSPRNG call per 256 ids instead of one per id (as crypto.randomUUID does). */
const pool = Buffer.allocUnsafe(16 * 256);
/** The pool as hex, 32 digits per id: each id is cut from it rather than encoded on its own. */
let poolHex = '';
let offset = pool.length;
/** The UUID variant digit (binary 10xx) for a random hex digit: its two low bits kept. */
const VARIANT_DIGIT: string[] = [];
for (const digit of '0123456789abcdef') VARIANT_DIGIT[digit.charCodeAt(0)] = '89ab'.charAt(Number.parseInt(digit, 16) & 3);
/** The hex of the last time stamped: ids come many per millisecond. */
let stampedAt = -1;
let stampHex = '';

/** An AIP typed id: prefix + 32 hex digits of a UUIDv7 (time-ordered). */
export function typedId(prefix: 'rcpt_' | 'act_' | 'msg_' | 'corr_', now: number = Date.now()): string {
  if (offset === pool.length) {
    randomFillSync(pool);
    poolHex = pool.toString('hex');
    offset = 0;
  }
  const at = 2 * offset;
  offset += 16;
  if (now !== stampedAt) {
    stampedAt = now;
    stampHex = now.toString(16).padStart(12, '0');
  }
  // 48 bits of time, the version digit 7, 12 random bits, the variant digit (2 random bits), 60 random bits.
  return `${prefix}${stampHex}7${poolHex.slice(at + 13, at + 16)}${VARIANT_DIGIT[poolHex.charCodeAt(at + 16)]}${poolHex.slice(at + 17, at + 32)}`;
}

/**
 * Whether every ledger stores and finds this identifier exactly: SQLite and PostgreSQL turn a
 * lone surrogate into U+FFFD, and PostgreSQL text cannot hold NUL.
 */
export function isStorableId(id: string): boolean {
  return id.isWellFormed() && !id.includes('\0');
}
