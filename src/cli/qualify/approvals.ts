import { randomBytes } from 'node:crypto';
import { CheckFailed, type CheckEvidence } from './types.js';
import { TERMINAL_STATUSES } from '../../contract/hermes-vocabulary.js';
import { resultEvidence, describeResult, type EndpointSession } from './session.js';

/** How long the last look at the other runs may take once the check's own deadline has passed. */
const FINAL_LOOK_MS = 5_000;

/** The provider choice the qualification gives: run the scratch command once (the default prompt confines it). */
export const APPROVAL_CHOICE = 'once';

export function newSessionId(): string {
  return `aip-qualification-${randomBytes(8).toString('hex')}`;
}

/** Starts an approval run in `sessionId` and waits until Hermes reports it waiting for approval. */
export async function startWaitingRun(session: EndpointSession, sessionId: string): Promise<{ runId: string; statuses: string[] }> {
  const { runId } = await session.startRun('approval', sessionId);
  const { status, seen } = await session.followStatus(runId, (value) => value === 'waiting_for_approval', 'waiting_for_approval', { failOnTerminal: true });
  if (status['session_id'] !== sessionId) {
    throw new CheckFailed(`run ${runId} was started with session_id ${sessionId} but its status reports session_id ${String(status['session_id'])}`);
  }
  return { runId, statuses: seen };
}

/**
 * Answers the pending approval of `selected` with a valid AIP grant, then follows `selected` to a
 * terminal status while every run in `others` (same session_id) must stay waiting_for_approval.
 */
export async function approveOnlySelected(session: EndpointSession, selected: string, others: string[], evidence: CheckEvidence): Promise<void> {
  const input = { run_id: selected, choice: APPROVAL_CHOICE };
  const result = await session.invoke('run_approval', input, { approval: session.grantFor(input) });
  const output = (result.output ?? {}) as { run_id?: unknown; choice?: unknown; resolved?: unknown };
  evidence['approval'] = { ...resultEvidence(result), run_id: output.run_id ?? null, choice: output.choice ?? null, resolved: output.resolved ?? null };
  if (result.status !== 'completed') throw new CheckFailed(`run_approval of run ${selected} with a valid AIP grant failed: ${describeResult(result)}`);
  if (output.run_id !== selected) throw new CheckFailed(`run_approval of run ${selected} answered for run ${String(output.run_id)}`);
  if (output.resolved !== 1) throw new CheckFailed(`run_approval of run ${selected} resolved ${String(output.resolved)} approvals, not exactly one`);

  const otherStatuses: Record<string, string[]> = Object.fromEntries(others.map((id) => [id, ['waiting_for_approval']]));
  evidence['other_runs_statuses'] = otherStatuses;
  const checkOthers = async (deadline?: number): Promise<void> => {
    for (const other of others) {
      const status = String((await session.readStatus(other, deadline))['status']);
      const seen = otherStatuses[other] as string[];
      if (seen[seen.length - 1] !== status) seen.push(status);
      if (status !== 'waiting_for_approval') {
        throw new CheckFailed(
          `answering the approval of run ${selected} changed run ${other}, which shares its session_id, from waiting_for_approval to ${status}: approval queues are not isolated per run`,
        );
      }
    }
  };
  try {
    const { seen } = await session.followStatus(selected, (value) => TERMINAL_STATUSES.has(value), 'a terminal status after its approval', {
      onEach: checkOthers,
    });
    evidence['selected_run_statuses'] = seen;
  } catch (error) {
    // A run that never moves on after its own approval, while another run of the session did, is the leak
    // itself: look once more (past the check's deadline if that is what ended the wait) to say so.
    if (error instanceof CheckFailed) await checkOthers(Date.now() + FINAL_LOOK_MS);
    throw error;
  }
  await checkOthers();
}
