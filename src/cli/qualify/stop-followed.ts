import { describeResult, resultEvidence } from './session.js';
import { CheckFailed, type Check } from './types.js';
import { TERMINAL_STATUSES } from '../../contract/hermes-vocabulary.js';

const ACTIVE = new Set(['running', 'waiting_for_approval']);

/** What a terminal status means after a stop; `completed` is an explained outcome, not a failure. */
const EXPLANATIONS: Record<string, string> = {
  cancelled: 'the run processed the stop',
  failed: 'the run failed while being stopped',
  completed: 'the run completed before the stop took effect; its effects stand',
  interrupted: 'the provider restarted before the run settled',
};

/** (6) A stop (with an AIP grant) is followed through status until cancelled, failed or another explained outcome. */
export const stopFollowed: Check = {
  id: 'stop_followed',
  title: 'stop is followed until cancelled, failed, or another explained outcome',
  async run(session, evidence) {
    const { runId } = await session.startRun('long');
    evidence['run_id'] = runId;
    const active = await session.followStatus(runId, (value) => ACTIVE.has(value), 'an active status (running or waiting_for_approval)', {
      failOnTerminal: true,
    });
    evidence['statuses_before_stop'] = active.seen;

    const input = { run_id: runId };
    const result = await session.invoke('run_stop', input, { approval: session.grantFor(input) });
    const receipt = (result.output ?? {}) as { status?: unknown };
    evidence['stop'] = { ...resultEvidence(result), receipt_status: receipt.status ?? null };
    if (result.status !== 'completed') throw new CheckFailed(`run_stop of active run ${runId} failed: ${describeResult(result)}`);

    const { status, seen } = await session.followStatus(runId, (value) => TERMINAL_STATUSES.has(value), 'a terminal status after the stop');
    const outcome = String(status['status']);
    evidence['statuses_after_stop'] = seen;
    evidence['outcome'] = outcome;
    evidence['explanation'] = EXPLANATIONS[outcome] ?? null;
    if (!(outcome in EXPLANATIONS)) throw new CheckFailed(`after the stop run ${runId} ended as ${outcome}, which has no known meaning`);
  },
};
