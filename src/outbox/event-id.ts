import { createHash } from 'node:crypto';
import type { JournalKey } from '../journal/types.js';

/**
 * The id an event has for one target: the same on every attempt and every replica, different per
 * target, and 36 characters (`evt_` and 128 bits of SHA-256), within any receiver's id limits.
 */
export function outboxEventId(targetId: string, key: JournalKey, sequence: number): string {
  const named = JSON.stringify([targetId, key.tenant_id ?? '', key.endpoint_id, key.run_id, sequence]);
  return `evt_${createHash('sha256').update(named).digest('hex').slice(0, 32)}`;
}
