import {
  answerWithGrant,
  approveInTurn,
  expectRefusedWhileQueued,
  expectResolvedOne,
  followWhileOthersWait,
  newSessionId,
  startSecondRun,
  startWaitingRun,
} from './approvals.js';
import type { Check } from './types.js';

/**
 * (4) Two runs sharing a session_id keep isolated approval queues: answering the newer one leaves the
 * older one waiting. Where the session takes turns (the newer waits, silent, for the older to end),
 * the answer to the newer has nothing to resolve and must leave the older waiting; the older is then
 * approved, and the newer asks for and gets its own approval once its turn comes.
 */
export const isolatedApprovals: Check = {
  id: 'isolated_approvals',
  title: 'two runs sharing a session ID still have isolated approval queues',
  async run(session, evidence) {
    const sessionId = newSessionId();
    evidence['session_id'] = sessionId;
    const older = await startWaitingRun(session, sessionId);
    evidence['older_run'] = { run_id: older.runId, statuses: older.statuses };
    const newer = await startSecondRun(session, sessionId);
    evidence['newer_run'] = { run_id: newer.runId, statuses: newer.statuses };
    // A queue keyed by session would hand the answer to the oldest pending approval: answer the newer run.
    const answer = await answerWithGrant(session, newer.runId, evidence, 'approval');
    const takesTurns = newer.waitsForTurn && answer.status !== 'completed';
    evidence['session_takes_turns'] = takesTurns;
    if (takesTurns) {
      await expectRefusedWhileQueued(session, answer, newer.runId, older.runId);
      await approveInTurn(session, older.runId, newer.runId, evidence);
      return;
    }
    expectResolvedOne(answer, newer.runId);
    await followWhileOthersWait(session, newer.runId, [older.runId], evidence);
    session.handOver = { sessionId, waitingRunId: older.runId };
  },
};
