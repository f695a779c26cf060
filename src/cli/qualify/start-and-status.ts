import { resultEvidence } from './session.js';
import { CheckFailed, type Check } from './types.js';

const KNOWN_STATUSES = new Set(['queued', 'running', 'waiting_for_approval', 'stopping', 'completed', 'failed', 'cancelled', 'interrupted']);

/** (2) One start with an idempotency key returns a new run id, and the run's status becomes visible. */
export const startAndStatus: Check = {
  id: 'start_and_status',
  title: 'one start with an idempotency key returns a unique run_id and its status becomes visible',
  async run(session, evidence) {
    const { runId, result } = await session.startRun('harmless');
    evidence['run_id'] = runId;
    evidence['start'] = { ...resultEvidence(result), receipt_status: (result.output as { status?: unknown }).status, idempotency_key: result.receipt?.idempotency_key ?? null };
    evidence['run_id_format'] = /^run_[0-9a-f]{32}$/.test(runId) ? 'run_<32 hex> (as at the pinned revision)' : 'other';
    if (!result.receipt?.idempotency_key) throw new CheckFailed('the run_start receipt does not carry the idempotency key it was sent with');

    const { status, seen } = await session.followStatus(runId, (value) => KNOWN_STATUSES.has(value), 'a known status');
    evidence['statuses_seen'] = seen;
    evidence['status'] = { run_id: status['run_id'], status: status['status'], last_event: status['last_event'] ?? null };
    if (status['run_id'] !== runId) throw new CheckFailed(`run_status of ${runId} answered for run ${String(status['run_id'])}`);
  },
};
