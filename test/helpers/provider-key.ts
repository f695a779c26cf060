import { createHash } from 'node:crypto';

/** The Idempotency-Key Hermes must see for a caller's key: an independent restatement of the documented derivation. */
export function providerKeyOf(capabilityId: string, key: string, tenantId: string | null = null): string {
  return `aip1-${createHash('sha256')
    .update(JSON.stringify([tenantId, capabilityId, key]))
    .digest('hex')}`;
}
