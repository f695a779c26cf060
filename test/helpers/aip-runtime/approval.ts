/**
 * An approved `ApprovalDecision` and the `ApprovalRecord` the central side pins in the route
 * (`approval_authorization`), shaped as the vector `native.request.approved_action` is: one
 * approving decision by a principal the selector names, 9-integer `recorded_at` /
 * `created_at` / `updated_at`, RFC 3339 `decided_at` / `expires_at`.
 */
import type { Principal } from '../../../src/host/wire/envelope.js';
import { rfc3339, timeArray } from '../../../src/host/wire/time.js';
import { hexId } from './deployment.js';

export const APPROVER = { id: 'human:ops-approver', kind: 'human' } as const;
export const POLICY_HASH = 'a'.repeat(64);
const APPROVAL_TTL_MS = 10 * 60_000;

export interface ApprovalParts {
  actionId: string;
  capabilityId: string;
  tenantId: string;
  /** The central principal: requester, subject and operator. */
  central: Principal;
  policyHash?: string;
  approvalId?: string;
  at?: number;
}

export function approvedDecision(approvalId: string, policyHash: string, at: number): Record<string, unknown> {
  return {
    approval_id: approvalId,
    decision: 'approved',
    approver: APPROVER,
    decided_at: rfc3339(at),
    reason: 'approved by the on-call operator',
    decision_id: `decision:${approvalId}`,
    policy_hash: policyHash,
  };
}

/** `{ decision, record }`: the action's `approval` and the route's matching `approval_authorization`. */
export function approvalFor(parts: ApprovalParts): { decision: Record<string, unknown>; record: Record<string, any> } {
  const at = parts.at ?? Date.now();
  const approvalId = parts.approvalId ?? hexId('appr_');
  const policyHash = parts.policyHash ?? POLICY_HASH;
  const decision = approvedDecision(approvalId, policyHash, at);
  const selector = { type: 'principal', id: APPROVER.id };
  const reason = 'stopping a Hermes run needs an operator';
  const record = {
    request: {
      id: approvalId,
      action_id: parts.actionId,
      capability_id: parts.capabilityId,
      requester: parts.central,
      subject: parts.central,
      approver_selector: selector,
      reason,
      expires_at: rfc3339(at + APPROVAL_TTL_MS),
      policy_decision_id: `policy:${parts.actionId}`,
      identity: { tenant: { id: parts.tenantId } },
      policy_snapshot: {
        required: true,
        reason,
        approver_selector: selector,
        ttl_ms: APPROVAL_TTL_MS,
        minimum_distinct_principals: 1,
        separation_of_duties: { requester_must_differ: false, operator_must_differ: false, allow_self_approval: false },
        policy_version: 'hermes-host-test/v1',
      },
      policy_hash: policyHash,
      operator: parts.central,
    },
    status: 'approved',
    decision,
    decisions: [
      {
        decision,
        authority: {
          principal_id: APPROVER.id,
          tenant_id: parts.tenantId,
          roles: [],
          groups: [],
          tenant_policies: [],
          external_systems: [],
          delegated_scopes: [],
          revision: 1,
          revoked: false,
        },
        evidence_hash: 'b'.repeat(64),
        recorded_at: timeArray(at),
      },
    ],
    created_at: timeArray(at),
    updated_at: timeArray(at),
  };
  return { decision, record };
}
