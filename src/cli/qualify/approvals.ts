import { randomBytes } from 'node:crypto';
import type { AipActionResult } from '../../index.js';
import { duration } from '../format.js';
import { CheckFailed, type CheckEvidence } from './types.js';
import { TERMINAL_STATUSES } from '../../contract/hermes-vocabulary.js';
import { errorCode } from '../../failures.js';
import { resultEvidence, describeResult, type EndpointSession } from './session.js';

/** How long the last look at the other runs may take once the check's own deadline has passed. */
const FINAL_LOOK_MS = 5_000;

/** The provider choice the qualification gives: run the scratch command once (the default prompt confines it). */
export const APPROVAL_CHOICE = 'once';

const WAITING = 'waiting_for_approval';
const CONFLICT = errorCode('conflict');

export function newSessionId(): string {
  return `aip-qualification-${randomBytes(8).toString('hex')}`;
}

/** A run that should ask for approval, as far as it got: it waits for one, or it has stayed without a single event. */
interface ApprovalWait {
  runId: string;
  reached: 'approval' | 'silence';
  status: Record<string, unknown>;
  /** Each distinct status value in the order seen. */
  statuses: string[];
}

/** A second run of a session whose first run waits for approval. */
export interface SecondRun {
  runId: string;
  statuses: string[];
  /** It stayed without an event while the first waited: the session takes turns (Hermes 0.22's session turn lease). */
  waitsForTurn: boolean;
}

/** Starts an approval run in `sessionId` and waits until Hermes reports it waiting for approval. */
export async function startWaitingRun(session: EndpointSession, sessionId: string): Promise<{ runId: string; statuses: string[] }> {
  const wait = await startApprovalRun(session, sessionId, session.settings.silentRunMs);
  if (wait.reached === 'silence') throw silentRunFailed(session, wait, 'while no other run of its session was active');
  return { runId: wait.runId, statuses: wait.statuses };
}

/**
 * Starts a second approval run in `sessionId` while its first run waits for approval: it waits for
 * approval too, or, where runs of a session take turns, it stays running without an event. Half the
 * silent-run limit decides; a second run that was only slow still meets what the turn path asks of it.
 */
export async function startSecondRun(session: EndpointSession, sessionId: string): Promise<SecondRun> {
  const wait = await startApprovalRun(session, sessionId, session.settings.silentRunMs / 2);
  return { runId: wait.runId, statuses: wait.statuses, waitsForTurn: wait.reached === 'silence' };
}

async function startApprovalRun(session: EndpointSession, sessionId: string, silentMs: number): Promise<ApprovalWait> {
  const { runId } = await session.startRun('approval', sessionId);
  const wait = await awaitApprovalRequest(session, runId, silentMs);
  if (wait.status['session_id'] !== sessionId) {
    throw new CheckFailed(`run ${runId} was started with session_id ${sessionId} but its status reports session_id ${String(wait.status['session_id'])}`);
  }
  return wait;
}

/**
 * Follows a run that should ask for approval until it waits for one or has gone `silentMs` without a
 * single event; a run that ends without asking fails the check at once.
 */
async function awaitApprovalRequest(session: EndpointSession, runId: string, silentMs: number): Promise<ApprovalWait> {
  const silentFrom = Date.now() + silentMs;
  const { status, seen } = await session.followStatus(
    runId,
    (value, record) => value === WAITING || TERMINAL_STATUSES.has(value) || (hasNoEvent(record) && Date.now() >= silentFrom),
    WAITING,
  );
  const value = String(status['status']);
  if (TERMINAL_STATUSES.has(value)) {
    throw new CheckFailed(
      `run ${runId} ended ${value} without asking for approval (no approval.request; statuses seen: ${seen.join(' → ')}): the approval prompt must make Hermes run a command it flags, with approvals.mode manual`,
    );
  }
  return { runId, reached: value === WAITING ? 'approval' : 'silence', status, statuses: seen };
}

/** No event yet: `last_event` null (up to 0.20.1) or absent (0.22). */
function hasNoEvent(status: Record<string, unknown>): boolean {
  return status['last_event'] === undefined || status['last_event'] === null;
}

function silentRunFailed(session: EndpointSession, wait: ApprovalWait, when: string): CheckFailed {
  return new CheckFailed(
    `run ${wait.runId} stayed ${String(wait.status['status'])} without a single event for ${duration(session.settings.silentRunMs)} ${when}: Hermes has not begun it, so it cannot ask for approval`,
  );
}

/** Answers the pending approval of `runId` with a valid AIP grant; the answer's shape is recorded under `key`. */
export async function answerWithGrant(session: EndpointSession, runId: string, evidence: CheckEvidence, key: string): Promise<AipActionResult> {
  const input = { run_id: runId, choice: APPROVAL_CHOICE };
  const result = await session.invoke('run_approval', input, { approval: session.grantFor(input) });
  const output = (result.output ?? {}) as { run_id?: unknown; choice?: unknown; resolved?: unknown };
  evidence[key] = { ...resultEvidence(result), run_id: output.run_id ?? null, choice: output.choice ?? null, resolved: output.resolved ?? null };
  return result;
}

export function expectResolvedOne(result: AipActionResult, runId: string): void {
  const output = (result.output ?? {}) as { run_id?: unknown; resolved?: unknown };
  if (result.status !== 'completed') throw new CheckFailed(`run_approval of run ${runId} with a valid AIP grant failed: ${describeResult(result)}`);
  if (output.run_id !== runId) throw new CheckFailed(`run_approval of run ${runId} answered for run ${String(output.run_id)}`);
  if (output.resolved !== 1) throw new CheckFailed(`run_approval of run ${runId} resolved ${String(output.resolved)} approvals, not exactly one`);
}

function notIsolated(selected: string, other: string, status: string, from = WAITING): CheckFailed {
  return new CheckFailed(
    `answering the approval of run ${selected} changed run ${other}, which shares its session_id, from ${from} to ${status}: approval queues are not isolated per run`,
  );
}

/**
 * Answers the pending approval of `selected` with a valid AIP grant, then follows `selected` to a
 * terminal status while every run in `others` (same session_id) must stay waiting_for_approval.
 */
export async function approveOnlySelected(session: EndpointSession, selected: string, others: string[], evidence: CheckEvidence): Promise<void> {
  expectResolvedOne(await answerWithGrant(session, selected, evidence, 'approval'), selected);
  await followWhileOthersWait(session, selected, others, evidence);
}

/** Follows `selected`, whose approval was answered, to a terminal status while every run in `others` must stay waiting_for_approval. */
export async function followWhileOthersWait(session: EndpointSession, selected: string, others: string[], evidence: CheckEvidence): Promise<void> {
  const otherStatuses: Record<string, string[]> = Object.fromEntries(others.map((id) => [id, [WAITING]]));
  evidence['other_runs_statuses'] = otherStatuses;
  const checkOthers = async (deadline?: number): Promise<void> => {
    for (const other of others) {
      const status = String((await session.readStatus(other, deadline))['status']);
      const seen = otherStatuses[other] as string[];
      if (seen[seen.length - 1] !== status) seen.push(status);
      if (status !== WAITING) throw notIsolated(selected, other, status);
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

/** Fails unless `runId` still waits for approval after an answer addressed to `selected`. */
async function expectStillWaiting(session: EndpointSession, runId: string, selected: string): Promise<void> {
  const status = String((await session.readStatus(runId))['status']);
  if (status !== WAITING) throw notIsolated(selected, runId, status);
}

/**
 * An answer to a run still waiting for its session's turn has nothing to resolve: Hermes must refuse
 * it (409 `approval_not_pending`) and the run of the session waiting for approval must not move.
 */
export async function expectRefusedWhileQueued(session: EndpointSession, answer: AipActionResult, queued: string, waiting: string): Promise<void> {
  if (answer.error?.code !== CONFLICT) {
    throw new CheckFailed(`run_approval of run ${queued}, which was waiting for its session's turn, was not refused as a conflict: ${describeResult(answer)}`);
  }
  await expectStillWaiting(session, waiting, queued);
}

/**
 * Where runs of a session take turns: approves `first` (waiting for approval) and follows it to its
 * end while `queued` (waiting for its turn) must not end; `queued` must then take its turn and ask for
 * its own approval, which is answered separately.
 */
export async function approveInTurn(session: EndpointSession, first: string, queued: string, evidence: CheckEvidence): Promise<void> {
  const turns: CheckEvidence = { first_run_id: first, queued_run_id: queued };
  evidence['session_turns'] = turns;
  expectResolvedOne(await answerWithGrant(session, first, turns, 'first_run_approval'), first);
  const queuedMeanwhile: string[] = [];
  turns['queued_run_statuses_while_first_ran'] = queuedMeanwhile;
  const whileQueued = async (): Promise<void> => {
    const status = String((await session.readStatus(queued))['status']);
    if (queuedMeanwhile[queuedMeanwhile.length - 1] !== status) queuedMeanwhile.push(status);
    if (TERMINAL_STATUSES.has(status)) throw notIsolated(first, queued, status, "waiting for its session's turn");
  };
  await whileQueued();
  const firstEnd = await session.followStatus(first, (value) => TERMINAL_STATUSES.has(value), 'a terminal status after its approval', {
    onEach: whileQueued,
  });
  turns['first_run_statuses'] = firstEnd.seen;

  const wait = await awaitApprovalRequest(session, queued, session.settings.silentRunMs);
  turns['queued_run_statuses'] = wait.statuses;
  if (wait.reached === 'silence') throw silentRunFailed(session, wait, `after run ${first} of its session ended, so it did not take its session's turn`);
  expectResolvedOne(await answerWithGrant(session, queued, turns, 'queued_run_approval'), queued);
  const queuedEnd = await session.followStatus(queued, (value) => TERMINAL_STATUSES.has(value), 'a terminal status after its approval');
  turns['queued_run_final_statuses'] = queuedEnd.seen;
}
