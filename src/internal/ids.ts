import { randomFillSync } from 'node:crypto';

/** Random bytes for 256 ids, refilled when used up: one CSPRNG call per 256 ids instead of one per id (as crypto.randomUUID does). */
const pool = Buffer.allocUnsafe(16 * 256);
let offset = pool.length;

/** An AIP typed id: prefix + 32 hex digits of a UUIDv7 (time-ordered). */
export function typedId(prefix: 'rcpt_' | 'act_' | 'msg_' | 'corr_', now: number = Date.now()): string {
  if (offset === pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  // Written in place and encoded from the pool itself: no Buffer view per id.
  const at = offset;
  offset += 16;
  pool.writeUIntBE(now, at, 6);
  pool[at + 6] = 0x70 | ((pool[at + 6] ?? 0) & 0x0f);
  pool[at + 8] = 0x80 | ((pool[at + 8] ?? 0) & 0x3f);
  return prefix + pool.toString('hex', at, at + 16);
}

/** In a `u` regexp only unpaired surrogates are code points of category Cs. */
const LONE_SURROGATE = /\p{Cs}/u;
const UNSTORABLE = /[\0\p{Cs}]/u;

/** Whether the text is well-formed Unicode (no lone surrogate). */
export function isWellFormedText(text: string): boolean {
  return !LONE_SURROGATE.test(text);
}

/**
 * Whether every ledger stores and finds this identifier exactly: SQLite and PostgreSQL turn a
 * lone surrogate into U+FFFD, and PostgreSQL text cannot hold NUL.
 */
export function isStorableId(id: string): boolean {
  return !UNSTORABLE.test(id);
}
