import { randomBytes } from 'node:crypto';

/** An AIP typed id: prefix + 32 hex digits of a UUIDv7 (time-ordered). */
export function typedId(prefix: 'rcpt_' | 'act_', now: number = Date.now()): string {
  const bytes = randomBytes(16);
  bytes.writeUIntBE(now, 0, 6);
  bytes[6] = 0x70 | ((bytes[6] ?? 0) & 0x0f);
  bytes[8] = 0x80 | ((bytes[8] ?? 0) & 0x3f);
  return prefix + bytes.toString('hex');
}
