import type { ApprovalGrant } from '../../index.js';
import { APPROVAL_CHOICE, approveOnlySelected, newSessionId, startWaitingRun } from './approvals.js';
import { describeResult, resultEvidence } from './session.js';
import { CheckFailed, type Check } from './types.js';
import { errorCode } from '../../failures.js';

const APPROVAL_REQUIRED = errorCode('approval_required');

/**
 * (5) run_approval without valid AIP evidence is refused before any provider call; with a grant it
 * resolves exactly one pending approval of the selected run while the other run of its session waits on.
 */
export const approvalRequiresEvidence: Check = {
  id: 'approval_requires_evidence',
  title: 'approval requires AIP evidence and changes only the selected run',
  async run(session, evidence) {
    let { sessionId, waitingRunId: other } = session.handOver;
    if (other !== undefined && (await session.readStatus(other))['status'] !== 'waiting_for_approval') other = undefined;
    if (sessionId === undefined || other === undefined) {
      sessionId = newSessionId();
      other = (await startWaitingRun(session, sessionId)).runId;
    }
    evidence['session_id'] = sessionId;
    evidence['other_run_id'] = other;
    const selected = (await startWaitingRun(session, sessionId)).runId;
    evidence['selected_run_id'] = selected;

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
    for (const runId of [selected, other]) {
      const status = (await session.readStatus(runId))['status'];
      if (status !== 'waiting_for_approval')
        throw new CheckFailed(`after the refused approvals run ${runId} is ${String(status)}, no longer waiting_for_approval`);
    }
    await approveOnlySelected(session, selected, [other], evidence);
  },
};
