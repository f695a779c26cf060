import type { ApprovalGrant } from '../../index.js';
import { APPROVAL_CHOICE, approveInTurn, approveOnlySelected, newSessionId, startSecondRun, startWaitingRun } from './approvals.js';
import { describeResult, resultEvidence, type EndpointSession } from './session.js';
import { CheckFailed, type Check, type CheckEvidence } from './types.js';
import { TERMINAL_STATUSES } from '../../contract/hermes-vocabulary.js';
import { errorCode } from '../../failures.js';

const APPROVAL_REQUIRED = errorCode('approval_required');

/**
 * (5) run_approval without valid AIP evidence is refused before any provider call; with a grant it
 * resolves exactly one pending approval of the selected run while the other run of its session waits
 * on: for its own approval, or (where the session takes turns) for its turn, and then asks for it.
 */
export const approvalRequiresEvidence: Check = {
  id: 'approval_requires_evidence',
  title: 'approval requires AIP evidence and changes only the selected run',
  async run(session, evidence) {
    let { sessionId, waitingRunId: waiting } = session.handOver;
    if (waiting !== undefined && (await session.readStatus(waiting))['status'] !== 'waiting_for_approval') waiting = undefined;
    if (sessionId === undefined || waiting === undefined) {
      sessionId = newSessionId();
      waiting = (await startWaitingRun(session, sessionId)).runId;
    }
    evidence['session_id'] = sessionId;
    const second = await startSecondRun(session, sessionId);
    evidence['session_takes_turns'] = second.waitsForTurn;
    // Where the session takes turns only its earlier run can be waiting for approval: that one is answered.
    const [selected, other] = second.waitsForTurn ? [waiting, second.runId] : [second.runId, waiting];
    evidence['selected_run_id'] = selected;
    evidence['other_run_id'] = other;

    await expectRefusalsWithoutEvidence(session, selected, evidence);
    await expectUnmoved(session, selected, 'waiting_for_approval');
    if (second.waitsForTurn) {
      await expectUnmoved(session, other, "waiting for its session's turn");
      await approveInTurn(session, selected, other, evidence);
      return;
    }
    await expectUnmoved(session, other, 'waiting_for_approval');
    await approveOnlySelected(session, selected, [other], evidence);
  },
};

/** Every approval of `selected` without a valid grant is refused with approval_required, and nothing reaches Hermes. */
async function expectRefusalsWithoutEvidence(session: EndpointSession, selected: string, evidence: CheckEvidence): Promise<void> {
  const input = { run_id: selected, choice: APPROVAL_CHOICE };
  const now = Date.now();
  const cases: Array<[string, ApprovalGrant | undefined]> = [
    ['no grant', undefined],
    ['denied grant', session.grantFor(input, { decision: 'denied' })],
    ['expired grant', session.grantFor(input, { grantedAt: now - 20 * 60_000, expiresAt: now - 5 * 60_000 })],
    ['grant for another input', session.grantFor({ ...input, choice: 'deny' })],
  ];
  const refusals: Array<Record<string, unknown>> = [];
  evidence['refusals'] = refusals;
  const { providerRequestCount } = session.settings;
  const requestsBefore = providerRequestCount?.();
  for (const [label, grant] of cases) {
    const result = await session.invoke('run_approval', input, grant === undefined ? {} : { approval: grant });
    refusals.push({ case: label, ...resultEvidence(result) });
    if (result.error?.code !== APPROVAL_REQUIRED) {
      throw new CheckFailed(`run_approval with ${label} was not refused with ${APPROVAL_REQUIRED}: ${describeResult(result)}`);
    }
    // The connector attaches a receipt once it has dispatched the request to Hermes.
    if (result.receipt !== undefined) throw new CheckFailed(`run_approval with ${label} was refused, but only after it was sent to Hermes`);
  }
  if (providerRequestCount && requestsBefore !== undefined) {
    const sent = providerRequestCount() - requestsBefore;
    evidence['provider_requests_during_refusals'] = sent;
    if (sent !== 0) throw new CheckFailed(`the simulator received ${sent} request(s) while the connector refused the approvals`);
  }
}

/** After the refusals `runId` is still where it was: waiting for approval, or (not ended) for its turn. */
async function expectUnmoved(session: EndpointSession, runId: string, where: string): Promise<void> {
  const status = String((await session.readStatus(runId))['status']);
  const unmoved = where === 'waiting_for_approval' ? status === where : !TERMINAL_STATUSES.has(status);
  if (!unmoved) throw new CheckFailed(`after the refused approvals run ${runId} is ${status}, no longer ${where}`);
}
