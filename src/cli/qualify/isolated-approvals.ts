import { approveOnlySelected, newSessionId, startWaitingRun } from './approvals.js';
import type { Check } from './types.js';

/** (4) Two runs sharing a session_id keep isolated approval queues: answering the newer one leaves the older one waiting. */
export const isolatedApprovals: Check = {
  id: 'isolated_approvals',
  title: 'two runs sharing a session ID still have isolated approval queues',
  async run(session, evidence) {
    const sessionId = newSessionId();
    evidence['session_id'] = sessionId;
    const older = await startWaitingRun(session, sessionId);
    evidence['older_run'] = { run_id: older.runId, statuses: older.statuses };
    const newer = await startWaitingRun(session, sessionId);
    evidence['newer_run'] = { run_id: newer.runId, statuses: newer.statuses };
    // A queue keyed by session would hand the answer to the oldest pending approval: answer the newer run.
    await approveOnlySelected(session, newer.runId, [older.runId], evidence);
    session.handOver = { sessionId, waitingRunId: older.runId };
  },
};
