import type { ApprovalGrant, HermesConnector } from '../../../index.js';
import type { ScenarioEvidence } from '../../kit/types.js';
import { TERMINAL_STATUSES } from '../../../contract/hermes-vocabulary.js';
import { codeOf, type Harness, type Invocation, kitId, outcome } from '../harness.js';

/** The approval authority the kit plays: two named approvers, both needed (a two-person rule). */
const AUTHORITY = { members: ['human:approver-left', 'human:approver-right'], quorum: 2 };
const CHOICE = 'once';

interface Decision {
  principal: string;
  accepted: boolean;
}

/**
 * The host's approval authority: it records decisions and issues an AIP grant only once a quorum
 * of distinct members approved. Only the grant ever reaches the connector.
 */
class HostAuthority {
  readonly decisions: Decision[] = [];

  constructor(private readonly now: () => number) {}

  decide(principal: string): void {
    const accepted = AUTHORITY.members.includes(principal) && !this.decisions.some((decision) => decision.accepted && decision.principal === principal);
    this.decisions.push({ principal, accepted });
  }

  grant(input: unknown): ApprovalGrant | undefined {
    const approvers = this.decisions.filter((decision) => decision.accepted).map((decision) => decision.principal);
    if (approvers.length < AUTHORITY.quorum) return undefined;
    const now = this.now();
    return {
      approvalId: kitId('appr_'),
      decision: 'approved',
      grantedAt: now,
      expiresAt: now + 10 * 60_000,
      evidence: {
        reason: 'conformance: two-person approval of one provider approval',
        inputSnapshot: structuredClone(input),
        policyDecision: { rule: 'quorum', required: AUTHORITY.quorum, approvers },
      },
    };
  }
}

/** Only a valid grant from the authority moves the run; a quorum is needed; the grant's use is kept; the run resumes once. */
export async function approvalLifecycle(h: Harness): Promise<ScenarioEvidence> {
  const connector = h.connector();
  const run = await h.startRun(connector, 'approval');
  const waiting = await h.followStatus(connector, run.runId, (status) => status === 'waiting_for_approval' || TERMINAL_STATUSES.has(status));
  if (waiting !== 'waiting_for_approval') throw new Error(`the approval run ${run.runId} never waited for approval (status ${String(waiting)})`);
  const input = { run_id: run.runId, choice: CHOICE };
  const authority = new HostAuthority(() => h.clock.now());
  const approve = (grant: ApprovalGrant | undefined) => h.invoke(connector, 'run_approval', input, grant ? { context: { approval: grant } } : {});

  authority.decide('human:approval-intruder');
  const refusals: Array<[string, Invocation]> = [['intruder only', await approve(authority.grant(input))]];
  const now = h.clock.now();
  const template = forged(input, now);
  refusals.push(['denied grant', await approve({ ...template, decision: 'denied' })]);
  refusals.push(['expired grant', await approve({ ...template, grantedAt: now - 20 * 60_000, expiresAt: now - 5 * 60_000 })]);
  refusals.push(['grant for another input', await approve({ ...template, evidence: { ...template.evidence, inputSnapshot: { ...input, choice: 'deny' } } })]);
  authority.decide('human:approver-left');
  const afterOne = await approve(authority.grant(input));
  refusals.push(['one of two approvers', afterOne]);
  const refusedLocally = refusals.every(([, call]) => codeOf(call.result) === 'approval_required' && call.requests.length === 0);
  const stillWaiting = await h.status(connector, run.runId);

  authority.decide('human:approver-left');
  authority.decide('human:approver-right');
  const grant = authority.grant(input);
  const approved = await approve(grant);
  const reuse = await approve(grant);
  const redelivery = await h.send(connector, approved.action, { context: { approval: grant as ApprovalGrant } });
  const approvalRequests = [approved, reuse, redelivery].flatMap((call) => call.requests).filter((request) => request.path.endsWith('/approval'));
  const finalStatus = await h.followStatus(connector, run.runId, (status) => TERMINAL_STATUSES.has(status));

  const quorum = stillWaiting === 'waiting_for_approval' && grant !== undefined && approved.result.status === 'completed' && approved.requests.length === 1;
  const persisted =
    codeOf(reuse.result) === 'approval_required' &&
    reuse.result.error?.details?.['original_action_id'] === approved.action.id &&
    reuse.requests.length === 0 &&
    hasContractEvidence(connector, h.cap('run_approval'), grant);
  const resolved = (approved.result.output as { resolved?: unknown } | undefined)?.resolved;
  const once = approvalRequests.length === 1 && redelivery.result.receipt?.['replayed'] === true && resolved === 1 && finalStatus === 'completed';

  return {
    source: h.provider.source,
    assertions: {
      authority_verified: outcome(
        refusedLocally,
        refusedLocally
          ? `${refusals.length} approvals without a valid grant (intruder only, denied, expired, other input, one of two approvers) were refused as approval_required before any request`
          : `answers: ${refusals.map(([label, call]) => `${label}: ${codeOf(call.result) ?? call.result.status}/${call.requests.length} request(s)`).join('; ')}`,
      ),
      quorum_enforced: outcome(
        quorum,
        quorum
          ? 'with one approver the run stayed waiting_for_approval and nothing was sent; the second distinct approver produced the grant and exactly one approval request'
          : `after one approver the run was ${String(stillWaiting)}; the quorum grant answered ${codeOf(approved.result) ?? approved.result.status}`,
      ),
      evidence_persisted: outcome(
        persisted,
        persisted
          ? 'the grant carried every evidence item the contract requires; its use was kept in the ledger: another action presenting it was refused, naming the approving action'
          : `a second action presenting the used grant answered ${codeOf(reuse.result) ?? reuse.result.status} after ${reuse.requests.length} request(s)`,
      ),
      resume_once: outcome(
        once,
        once
          ? 'Hermes saw exactly one approval request (resolved 1) although the approving action was delivered twice and the grant presented three times; the run then completed'
          : `${approvalRequests.length} approval request(s), resolved ${String(resolved)}, redelivery replayed ${String(redelivery.result.receipt?.['replayed'])}, final status ${String(finalStatus)}`,
      ),
    },
    artifacts: [
      run.action.id,
      run.runId,
      approved.action.id,
      reuse.action.id,
      ...refusals.map(([, call]) => call.action.id),
      ...approvalRequests.map((request) => request.id),
    ],
    hostRoles: [`approval authority: members ${AUTHORITY.members.join(', ')}, quorum ${AUTHORITY.quorum} distinct approvers; it issues the AIP grant`],
    observations: {
      decisions: authority.decisions,
      refusals: refusals.map(([label, call]) => ({
        case: label,
        action_id: call.action.id,
        code: call.result.error?.code ?? null,
        provider_requests: call.requests.length,
      })),
      status_after_one_approver: stillWaiting ?? null,
      approval_requests: approvalRequests.map((request) => request.id),
      final_status: finalStatus ?? null,
    },
    detail: 'the quorum is the host’s rule (the contract selects tenant_policy); the connector’s part is to act only on a valid, unused grant',
  };
}

function forged(input: unknown, now: number): ApprovalGrant {
  return {
    approvalId: kitId('appr_'),
    decision: 'approved',
    grantedAt: now,
    expiresAt: now + 60_000,
    evidence: { reason: 'not from the authority', inputSnapshot: structuredClone(input), policyDecision: { rule: 'none' } },
  };
}

/** The grant holds every evidence item the capability's approval policy requires. */
function hasContractEvidence(connector: HermesConnector, capabilityId: string, grant: ApprovalGrant | undefined): boolean {
  const required = ((connector.capability(capabilityId)?.contract as { approval?: { evidence_requirements?: string[] } } | undefined)?.approval
    ?.evidence_requirements ?? []) as string[];
  const present: Record<string, unknown> = {
    reason: grant?.evidence.reason,
    input_snapshot: grant?.evidence.inputSnapshot,
    policy_decision: grant?.evidence.policyDecision,
  };
  return grant !== undefined && required.every((item) => present[item] !== undefined && present[item] !== '');
}
