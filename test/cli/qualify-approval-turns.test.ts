/**
 * Checks 4 and 5 decide by what Hermes does. Where runs of one session take turns (0.22's session
 * turn lease, the simulator's `v0.22` profile), the second run waits silently for the first: the check
 * must still show that an answer to one run never resolves another's, and record that the session
 * takes turns. A run that cannot reach an approval is named as such once it has gone `silentRunMs`
 * without an event, long before the step deadline (60 s here, beyond the tests' own timeout).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startHermesSimulator, type HermesSimulatorOptions, type RunStep } from 'aip-connector-hermes-agent/simulator';
import { createHermesConnector, createMemoryLedger } from '../../src/index.js';
import { approvalRequiresEvidence } from '../../src/cli/qualify/approval-requires-evidence.js';
import { isolatedApprovals } from '../../src/cli/qualify/isolated-approvals.js';
import { EndpointSession, type QualifySettings } from '../../src/cli/qualify/session.js';
import type { Check } from '../../src/cli/qualify/types.js';
import { simulatorQualifySettings } from './qualify-helpers.js';

const KEY = 'hk_turns_test_key_7c2e9d41';
const STEP_TIMEOUT_MS = 60_000;
const open: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  for (const item of open.splice(0).reverse()) await item.close();
});

const SILENT: RunStep[] = [{ type: 'sleep', ms: 600_000 }];

async function runCheck(
  check: Check,
  options: Partial<HermesSimulatorOptions>,
  settings: Partial<QualifySettings> = {},
): Promise<{ evidence: Record<string, unknown>; failure: Error | undefined }> {
  const sim = await startHermesSimulator({ apiKey: KEY, keepaliveMs: 200, ...options });
  open.push(sim);
  const ledger = createMemoryLedger();
  open.push(ledger);
  const connector = createHermesConnector({ endpoints: [{ id: 'local', baseUrl: sim.url, apiKey: KEY }], ledger });
  open.push(connector);
  const qualify = simulatorQualifySettings({ stepTimeoutMs: STEP_TIMEOUT_MS, providerRequestCount: () => sim.requests.length, ...settings });
  const session = new EndpointSession({ id: 'local', baseUrl: sim.url, apiKey: KEY }, connector, ledger, qualify, new Set());
  session.deadline = Date.now() + qualify.stepTimeoutMs;
  session.checkId = check.id;
  const evidence: Record<string, unknown> = {};
  const failure = await check.run(session, evidence).then(
    () => undefined,
    (error: unknown) => error as Error,
  );
  return { evidence, failure };
}

function approvalScript(steps: RunStep[]): Partial<QualifySettings> {
  const settings = simulatorQualifySettings();
  return { scripts: { ...(settings.scripts as NonNullable<QualifySettings['scripts']>), approval: steps } };
}

describe('checks 4 and 5 where the runs of a session take turns (profile v0.22)', { timeout: 30_000 }, () => {
  it('check 4 passes: the queued run is refused 409 approval_not_pending, the older still waits, then each is approved in turn', async () => {
    const { evidence, failure } = await runCheck(isolatedApprovals, { profile: 'v0.22' });
    expect(failure).toBeUndefined();
    const older = (evidence['older_run'] as { run_id: string }).run_id;
    const newer = (evidence['newer_run'] as { run_id: string; statuses: string[] }).run_id;
    expect(evidence['newer_run']).toMatchObject({ statuses: ['running'] });
    expect(evidence['session_takes_turns']).toBe(true);
    expect(evidence['approval']).toMatchObject({ status: 'failed', http_status: 409, provider_code: 'approval_not_pending' });
    expect(evidence['session_turns']).toMatchObject({
      first_run_id: older,
      queued_run_id: newer,
      first_run_approval: { status: 'completed', run_id: older, resolved: 1 },
      queued_run_approval: { status: 'completed', run_id: newer, resolved: 1 },
    });
    const turns = evidence['session_turns'] as Record<string, string[]>;
    expect(turns['queued_run_statuses']?.at(-1)).toBe('waiting_for_approval');
    expect(turns['first_run_statuses']?.at(-1)).toBe('completed');
    expect(turns['queued_run_final_statuses']?.at(-1)).toBe('completed');
  });

  it('check 5 passes: the waiting run refuses every approval without evidence, and the queued one asks for its own after it', async () => {
    const { evidence, failure } = await runCheck(approvalRequiresEvidence, { profile: 'v0.22' });
    expect(failure).toBeUndefined();
    expect(evidence['session_takes_turns']).toBe(true);
    expect(evidence['provider_requests_during_refusals']).toBe(0);
    expect((evidence['refusals'] as unknown[]).length).toBe(4);
    expect(evidence['session_turns']).toMatchObject({
      first_run_id: evidence['selected_run_id'],
      queued_run_id: evidence['other_run_id'],
      queued_run_approval: { status: 'completed', resolved: 1 },
    });
  });

  it('check 4 still fails when an answer to the queued run resolves the older run of its session', async () => {
    const { failure } = await runCheck(isolatedApprovals, { profile: 'v0.22', misbehaviour: { approvalsLeakAcrossSession: true } });
    expect(failure?.message).toMatch(
      /^answering the approval of run run_\w+ changed run run_\w+, which shares its session_id, from waiting_for_approval to \w+: approval queues are not isolated per run$/,
    );
  });

  it('records that the session does not take turns where both runs wait for approval at once (profile v0.20)', async () => {
    const four = await runCheck(isolatedApprovals, { profile: 'v0.20' });
    expect(four.failure).toBeUndefined();
    expect(four.evidence['session_takes_turns']).toBe(false);
    expect((four.evidence['newer_run'] as { statuses: string[] }).statuses.at(-1)).toBe('waiting_for_approval');
    expect(four.evidence['session_turns']).toBeUndefined();
    const five = await runCheck(approvalRequiresEvidence, { profile: 'v0.20' });
    expect(five.failure).toBeUndefined();
    expect(five.evidence['session_takes_turns']).toBe(false);
  });
});

describe('a run that cannot reach an approval is named at once, not at the step deadline', { timeout: 30_000 }, () => {
  it.each([
    ['isolated_approvals', isolatedApprovals],
    ['approval_requires_evidence', approvalRequiresEvidence],
  ])('%s: a run that completes without approval.request', async (_id, check) => {
    const harmless = simulatorQualifySettings().scripts?.harmless as RunStep[];
    const { failure } = await runCheck(check, {}, approvalScript(harmless));
    expect(failure?.message).toMatch(
      /^run run_\w+ ended completed without asking for approval \(no approval\.request; statuses seen: .*completed\): the approval prompt must make Hermes run a command it flags, with approvals\.mode manual$/,
    );
  });

  it('a run that stays silent with no other run of its session active', async () => {
    const { failure } = await runCheck(isolatedApprovals, { profile: 'v0.20' }, approvalScript(SILENT));
    expect(failure?.message).toMatch(
      /^run run_\w+ stayed running without a single event for 2 s while no other run of its session was active: Hermes has not begun it, so it cannot ask for approval$/,
    );
  });

  it("a queued run that never takes its session's turn after the older one ended (v0.22)", async () => {
    let approvalRuns = 0;
    const script = (body: Record<string, unknown>): RunStep[] => (++approvalRuns === 2 ? SILENT : (body['sim_script'] as RunStep[]));
    const { evidence, failure } = await runCheck(isolatedApprovals, { profile: 'v0.22', script });
    const older = (evidence['older_run'] as { run_id: string }).run_id;
    expect(failure?.message).toMatch(
      new RegExp(
        `^run run_\\w+ stayed running without a single event for 2 s after run ${older} of its session ended, so it did not take its session's turn: Hermes has not begun it, so it cannot ask for approval$`,
      ),
    );
  });
});
