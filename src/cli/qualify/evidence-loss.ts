import { randomBytes } from 'node:crypto';
import { describeResult, resultEvidence } from './session.js';
import { CheckFailed, type Check } from './types.js';

const NOT_FOUND = 'connector.hermes_agent.not_found';
const ABSENCE_STATEMENT =
  'absence is not proof that nothing ran: an unknown run id, a run past its retention and a run lost in a provider restart all answer not_found, and any external effect of such a run may have happened';

/** (8) An unknown or expired run id is reported as evidence loss (not_found), not as proof that nothing happened. */
export const evidenceLoss: Check = {
  id: 'evidence_loss',
  title: 'process restart and retention expiry are reported as evidence loss, not as proof that no external effect occurred',
  async run(session, evidence) {
    const runId = `run_${randomBytes(16).toString('hex')}`;
    evidence['run_id'] = runId;
    const status = await session.invoke('run_status', { run_id: runId });
    evidence['status_read'] = resultEvidence(status);
    if (status.status === 'completed') throw new CheckFailed(`run_status answered a status for run ${runId}, which was never started`);
    if (status.error?.code !== NOT_FOUND) throw new CheckFailed(`run_status of the unknown run ${runId} answered ${describeResult(status)}, not ${NOT_FOUND}`);
    const events = await session.invoke('run_events', { run_id: runId });
    evidence['events_read'] = resultEvidence(events);
    if (events.error?.code !== NOT_FOUND) throw new CheckFailed(`run_events of the unknown run ${runId} answered ${describeResult(events)}, not ${NOT_FOUND}`);
    evidence['interpretation'] = 'evidence_lost';
    evidence['statement'] = ABSENCE_STATEMENT;
  },
};
