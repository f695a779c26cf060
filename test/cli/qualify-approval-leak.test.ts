import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checksById, readEvidence, runCli, simulatorWithConfig } from './helpers.js';

describe('qualification of a Hermes whose approvals leak across runs of one session', { timeout: 60_000 }, () => {
  it('fails isolated_approvals (and approval_requires_evidence) with a reason naming the released run', async () => {
    const { configPath, folder } = await simulatorWithConfig({ misbehaviour: { approvalsLeakAcrossSession: true } });
    const out = join(folder, 'out');
    const run = await runCli(['qualify', '--config', configPath, '--out', out, '--timeout', '5']);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/Qualification FAILED: 6\/8/);

    const checks = checksById(readEvidence(out));
    const isolated = checks.get('isolated_approvals');
    expect(isolated?.result).toBe('failed');
    expect(isolated?.reason).toMatch(
      /answering the approval of run run_\w+ changed run (run_\w+), which shares its session_id, from waiting_for_approval to \w+: approval queues are not isolated per run/,
    );
    expect(isolated?.reason).toContain(String((isolated?.evidence['older_run'] as { run_id: string }).run_id));
    expect(checks.get('approval_requires_evidence')?.reason).toMatch(/approval queues are not isolated per run/);
    for (const id of ['discovery', 'start_and_status', 'ordered_events', 'stop_followed', 'disconnect_reconciled', 'evidence_loss']) {
      expect(checks.get(id)?.result, `${id}: ${checks.get(id)?.reason}`).toBe('passed');
    }
    expect(run.stdout).toContain('FAIL 4. isolated_approvals');
  });
});
