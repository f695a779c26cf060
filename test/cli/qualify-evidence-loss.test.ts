/**
 * Check 8 observes the connector recording evidence loss; it does not assume it. A ledger that
 * records a run lost in a restart as `completed` (or a binding Hermes never knew as anything but
 * lost) makes the check fail, on both of its paths.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startHermesSimulator, type HermesSimulator } from 'aip-connector-hermes-agent/simulator';
import { createHermesConnector, createMemoryLedger, type HermesConnector, type RunLedger } from '../../src/index.js';
import { evidenceLoss } from '../../src/cli/qualify/evidence-loss.js';
import { EndpointSession } from '../../src/cli/qualify/session.js';
import type { RunEvidencePatch, RunRef } from '../../src/ledger/types.js';
import { ledgerOverriding, simulatorQualifySettings } from './qualify-helpers.js';

const KEY = 'hk_check8_test_key_0a1b2c3d';
const open: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  for (const item of open.splice(0).reverse()) await item.close();
});

/** A ledger that turns "evidence lost" into "completed": absence taken as success. */
function ledgerThatCallsLossCompleted(inner: RunLedger): RunLedger {
  return ledgerOverriding(inner, {
    updateRun: (run: RunRef, patch: RunEvidencePatch) =>
      inner.updateRun(run, patch.evidence_lost ? { updated_at: patch.updated_at, last_status: 'completed' } : patch),
  });
}

async function sessionOver(honest: boolean, withRestart: boolean): Promise<{ session: EndpointSession; sim: HermesSimulator }> {
  const sim = await startHermesSimulator({ apiKey: KEY, keepaliveMs: 200 });
  open.push(sim);
  const inner = createMemoryLedger();
  open.push(inner);
  const ledger = honest ? inner : ledgerThatCallsLossCompleted(inner);
  const connector: HermesConnector = createHermesConnector({ endpoints: [{ id: 'local', baseUrl: sim.url, apiKey: KEY }], ledger });
  open.push(connector);
  const settings = simulatorQualifySettings(withRestart ? { restartProvider: () => sim.restart() } : {});
  const session = new EndpointSession({ id: 'local', baseUrl: sim.url, apiKey: KEY }, connector, ledger, settings, new Set());
  session.deadline = Date.now() + settings.stepTimeoutMs;
  session.checkId = 'evidence_loss';
  return { session, sim };
}

describe.each([
  ['a started run lost in a provider restart (the simulator at the pin)', true],
  ['a ledger binding of a run Hermes never issued (a live Hermes)', false],
])('check 8 on %s', (_name, withRestart) => {
  it('passes when the connector records the binding as evidence lost', async () => {
    const { session, sim } = await sessionOver(true, withRestart);
    const evidence: Record<string, unknown> = {};
    await evidenceLoss.run(session, evidence);
    expect(evidence['binding_after']).toMatchObject({ run_id: evidence['run_id'], evidence_lost: true });
    expect(evidence['status_read']).toMatchObject({ code: 'connector.hermes_agent.not_found' });
    expect(sim.startCount()).toBe(withRestart ? 1 : 0);
  });

  it('fails when the ledger records the lost run as completed', async () => {
    const { session } = await sessionOver(false, withRestart);
    const evidence: Record<string, unknown> = {};
    await expect(evidenceLoss.run(session, evidence)).rejects.toThrow(
      /did not record evidence loss for run run_\w+.*last_status completed, evidence_lost false/,
    );
    expect(evidence['binding_after']).toMatchObject({ last_status: 'completed', evidence_lost: false });
  });
});
