import type { AipAction } from '../../index.js';
import { typedId } from '../../internal/ids.js';
import { describeResult, resultEvidence, type EndpointSession } from './session.js';
import { CheckFailed, type Check } from './types.js';

const KNOWN_STATUSES = new Set(['queued', 'running', 'waiting_for_approval', 'stopping', 'completed', 'failed', 'cancelled', 'interrupted']);

/**
 * (2) One start with an idempotency key returns a new run id, the ledger binds it to the action,
 * the same start sent again is answered from the ledger without a second run, and the run's
 * status becomes visible.
 */
export const startAndStatus: Check = {
  id: 'start_and_status',
  title: 'one start with an idempotency key returns a unique run_id and its status becomes visible',
  async run(session, evidence) {
    const { runId, result, action } = await session.startRun('harmless');
    evidence['run_id'] = runId;
    evidence['start'] = {
      ...resultEvidence(result),
      receipt_status: (result.output as { status?: unknown }).status,
      idempotency_key: result.receipt?.idempotency_key ?? null,
    };
    evidence['run_id_format'] = /^run_[0-9a-f]{32}$/.test(runId) ? 'run_<32 hex> (as at the pinned revision)' : 'other';
    if (!result.receipt?.idempotency_key) throw new CheckFailed('the run_start receipt does not carry the idempotency key it was sent with');
    evidence['binding'] = await checkBinding(session, action, runId);
    evidence['replay'] = await checkReplay(session, action, runId);

    const { status, seen } = await session.followStatus(runId, (value) => KNOWN_STATUSES.has(value), 'a known status');
    evidence['statuses_seen'] = seen;
    evidence['status'] = { run_id: status['run_id'], status: status['status'], last_event: status['last_event'] ?? null };
    if (status['run_id'] !== runId) throw new CheckFailed(`run_status of ${runId} answered for run ${String(status['run_id'])}`);
  },
};

/** The ledger's record of the start: this run, this endpoint, this action. */
async function checkBinding(session: EndpointSession, action: AipAction, runId: string): Promise<Record<string, unknown>> {
  const binding = await session.connector.evidence(action.id);
  if (!binding) throw new CheckFailed(`the run ledger holds no binding for the run_start action ${action.id}`);
  if (binding.run_id !== runId || binding.endpoint_id !== session.endpoint.id) {
    throw new CheckFailed(`the run ledger binds action ${action.id} to run ${binding.run_id} on endpoint ${binding.endpoint_id}, not to run ${runId}`);
  }
  return { action_id: binding.action_id, run_id: binding.run_id, last_status: binding.last_status, credential_revision: binding.credential_revision };
}

/** The same start again (same key, same input, a new action id, as a caller's retry sends it): one run, the original answer, Hermes not asked. */
async function checkReplay(session: EndpointSession, action: AipAction, runId: string): Promise<Record<string, unknown>> {
  const requestsBefore = session.settings.providerRequestCount?.();
  const replay = await session.send({ ...action, id: typedId('act_') });
  const replayedRunId = (replay.output as { run_id?: unknown } | undefined)?.run_id;
  const requestsSent = requestsBefore === undefined ? null : (session.settings.providerRequestCount?.() ?? 0) - requestsBefore;
  const record = {
    ...resultEvidence(replay),
    run_id: replayedRunId ?? null,
    replayed: replay.receipt?.replayed ?? false,
    original_action_id: replay.receipt?.original_action_id ?? null,
    provider_requests: requestsSent,
  };
  if (replay.status !== 'completed' || replayedRunId !== runId)
    throw new CheckFailed(`the same run_start sent again did not return run ${runId}: ${describeResult(replay)}`);
  if (replay.receipt?.replayed !== true || replay.receipt.original_action_id !== action.id) {
    throw new CheckFailed('the same run_start sent again was not marked as a replay of the original action');
  }
  if (requestsSent !== null && requestsSent > 0)
    throw new CheckFailed(`the same run_start sent again reached Hermes (${requestsSent} request(s)); a replay must not`);
  return record;
}
