/**
 * The route's verified `approval_authorization` (an `ApprovalRecord`) on the host: imported into
 * the run ledger as the reference imports it into its approval journal (the first record under an
 * approval id stands; a different one is a conflict), and turned into the connector's
 * ApprovalGrant, which the connector's ledger keeps single-use.
 */
import type { RunLedger } from '../ledger/types.js';
import type { ApprovalGrant } from '../types.js';
import { asObject } from './checks.js';
import { approvalRecordFingerprint } from './wire/approval.js';
import type { Json } from './wire/json.js';
import { parseRfc3339 } from './wire/time.js';

/** How long an imported record is kept after its approval's own expiry: a replayed route still meets it. */
const IMPORT_RETENTION_MS = 24 * 60 * 60 * 1000;

export type ImportOutcome = 'imported' | 'conflict';

/** Imports the record under (tenant, approval id); 'conflict' when another record stands there. A failing ledger rejects. */
export async function importApproval(ledger: RunLedger, record: Record<string, unknown>, tenantId: string, now: number): Promise<ImportOutcome> {
  const request = asObject(record.request) ?? {};
  const digest = approvalRecordFingerprint(record as Json);
  const expiresAt = Math.max(grantExpiry(record) ?? now, now) + IMPORT_RETENTION_MS;
  const standing = await ledger.importApproval({ tenant_id: tenantId, approval_id: String(request.id), digest, imported_at: now, expires_at: expiresAt });
  return standing.digest === digest ? 'imported' : 'conflict';
}

/**
 * The connector's grant for an approved action: approvalId = request.id, granted at the decision,
 * expiring with the request (else decided_at + the policy's ttl_ms, else at once: fail closed),
 * evidence = the decision's reason (else the request's), the action's input, and the policy decision.
 */
export function approvalGrant(record: Record<string, unknown>, action: Record<string, unknown>): ApprovalGrant {
  const request = asObject(record.request) ?? {};
  const decision = asObject(record.decision) ?? {};
  const grantedAt = parseRfc3339(String(decision.decided_at)) ?? 0;
  return {
    approvalId: String(request.id),
    decision: 'approved',
    grantedAt,
    expiresAt: grantExpiry(record) ?? grantedAt,
    evidence: {
      reason: typeof decision.reason === 'string' && decision.reason !== '' ? decision.reason : String(request.reason ?? ''),
      inputSnapshot: action.input,
      policyDecision: { policy_hash: request.policy_hash ?? null, policy_decision_id: request.policy_decision_id ?? null },
    },
  };
}

function grantExpiry(record: Record<string, unknown>): number | undefined {
  const request = asObject(record.request) ?? {};
  if (typeof request.expires_at === 'string') return parseRfc3339(request.expires_at);
  const decidedAt = parseRfc3339(String(asObject(record.decision)?.decided_at));
  const ttl = asObject(request.policy_snapshot)?.ttl_ms;
  return decidedAt !== undefined && typeof ttl === 'number' ? decidedAt + ttl : undefined;
}
