import { randomBytes } from 'node:crypto';
import type { RunEvidence } from '../../index.js';
import { typedId } from '../../internal/ids.js';
import { credentialRevision } from '../../config.js';
import { describeResult, resultEvidence, type EndpointSession } from './session.js';
import { CheckFailed, type Check } from './types.js';
import { errorCode } from '../../failures.js';

const NOT_FOUND = errorCode('not_found');
const INTERRUPTED_STATEMENT =
  'the provider kept the run over its restart and says it was interrupted before it settled: an explained outcome, and any external effect it had before may have happened';

/** What Hermes says of the run, with when it marked it interrupted where its record says so. */
function interruptedStatement(binding: RunEvidence): string {
  if (binding.interrupted_at === undefined) return INTERRUPTED_STATEMENT;
  return `${INTERRUPTED_STATEMENT} (Hermes marked it interrupted at ${new Date(binding.interrupted_at).toISOString()})`;
}
const ABSENCE_STATEMENT =
  'absence is not proof that nothing ran: an unknown run id, a run past its retention and a run lost in a provider restart all answer not_found, and any external effect of such a run may have happened';

/**
 * (8) A run the ledger binds and Hermes no longer knows is recorded as evidence loss, not as an
 * outcome. Against the simulator at the pin a started run is lost in a provider restart; against a
 * live Hermes, which cannot be restarted from here, the ledger is given a binding of a run Hermes
 * never issued. Either way `reconcile()` must mark the binding `evidence_lost`.
 */
export const evidenceLoss: Check = {
  id: 'evidence_loss',
  title: 'process restart and retention expiry are reported as evidence loss, not as proof that no external effect occurred',
  async run(session, evidence) {
    const lost = session.settings.restartProvider ? await runLostInRestart(session) : await bindingUnknownToHermes(session);
    evidence['method'] = lost.method;
    evidence['run_id'] = lost.runId;
    evidence['binding_before'] = bindingEvidence(lost.before);

    const { after, passes } = await reconcileUntilUpdated(session, lost);
    evidence['reconcile_passes'] = passes;
    evidence['binding_after'] = after ? bindingEvidence(after) : null;
    if (!after) throw new CheckFailed(`the run ledger lost its binding of run ${lost.runId} during reconcile()`);
    if (after.last_status === 'interrupted') {
      evidence['interpretation'] = 'interrupted';
      evidence['statement'] = interruptedStatement(after);
      return;
    }
    if (!after.evidence_lost) {
      throw new CheckFailed(
        `the connector did not record evidence loss for run ${lost.runId}, which the ledger binds and Hermes no longer knows: after reconcile() the binding says last_status ${after.last_status}, evidence_lost false`,
      );
    }

    const status = await session.invoke('run_status', { run_id: lost.runId });
    evidence['status_read'] = resultEvidence(status);
    if (status.error?.code !== NOT_FOUND)
      throw new CheckFailed(`run_status of the lost run ${lost.runId} answered ${describeResult(status)}, not ${NOT_FOUND}`);
    evidence['interpretation'] = 'evidence_lost';
    evidence['statement'] = ABSENCE_STATEMENT;
  },
};

/** A restart drops every pooled connection, so a pass may only meet a dead socket: reconcile() again until the binding changes. */
const RECONCILE_PASSES = 5;

async function reconcileUntilUpdated(session: EndpointSession, lost: LostRun): Promise<{ after: RunEvidence | null; passes: number }> {
  let after: RunEvidence | null = lost.before;
  let passes = 0;
  const unchanged = (binding: RunEvidence) =>
    !binding.evidence_lost && binding.updated_at === lost.before.updated_at && binding.last_status === lost.before.last_status;
  while (after && unchanged(after) && passes < RECONCILE_PASSES) {
    await session.connector.reconcile();
    passes += 1;
    after = await session.connector.evidence(lost.actionId);
  }
  return { after, passes };
}

interface LostRun {
  method: string;
  runId: string;
  actionId: string;
  before: RunEvidence;
}

/** Starts a run (the ledger binds it), then restarts the provider, which forgets every run. */
async function runLostInRestart(session: EndpointSession): Promise<LostRun> {
  const { runId, action } = await session.startRun('long');
  const before = await session.connector.evidence(action.id);
  if (!before || before.run_id !== runId) throw new CheckFailed(`the run ledger holds no binding of run ${runId} for the run_start action ${action.id}`);
  session.settings.restartProvider?.();
  return { method: 'a started run, then a provider restart', runId, actionId: action.id, before };
}

/** A binding, written through the ledger's own API, of a run id Hermes never issued (as after a restart or retention expiry). */
async function bindingUnknownToHermes(session: EndpointSession): Promise<LostRun> {
  const now = Date.now();
  const runId = `run_${randomBytes(16).toString('hex')}`;
  const before: RunEvidence = {
    action_id: typedId('act_'),
    capability_id: session.cap('run_start'),
    endpoint_id: session.endpoint.id,
    tenant_id: session.endpoint.tenantId ?? null,
    run_id: runId,
    session_id: runId,
    credential_revision: credentialRevision(session.endpoint.apiKey),
    created_at: now,
    updated_at: now,
    last_status: 'started',
    terminal_event: null,
    evidence_lost: false,
  };
  await session.ledger.recordRun(before);
  return { method: 'a ledger binding of a run id Hermes never issued', runId, actionId: before.action_id, before };
}

function bindingEvidence(binding: RunEvidence): Record<string, unknown> {
  return {
    action_id: binding.action_id,
    run_id: binding.run_id,
    last_status: binding.last_status,
    terminal_event: binding.terminal_event,
    evidence_lost: binding.evidence_lost,
    interrupted_at: binding.interrupted_at === undefined ? null : new Date(binding.interrupted_at).toISOString(),
  };
}
