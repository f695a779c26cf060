import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CHECK_IDS, readEvidence, runCli, tempDir } from './helpers.js';

describe('hermes-aip qualify --simulate --out DIR (what npm start runs)', { timeout: 60_000 }, () => {
  it('passes all eight checks against the embedded simulator, writes both files and leaves nothing running', async () => {
    const out = join(tempDir(), 'qualification');
    // finished() resolves only once the process has exited: nothing may keep it alive.
    const run = await runCli(['qualify', '--simulate', '--out', out]);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stderr).toBe('');
    expect(run.stdout).toMatch(/Qualification PASSED: 8\/8 checks passed on 1 endpoint/);
    expect(run.stdout).toContain(`Report:   ${join(out, 'report.html')}`);
    for (const id of CHECK_IDS) expect(run.stdout).toContain(`PASS ${CHECK_IDS.indexOf(id) + 1}. ${id}`);

    const evidence = readEvidence(out);
    expect(evidence.result).toBe('passed');
    expect(evidence['target']).toMatchObject({ kind: 'simulator', simulator_profile: 'pin' });
    expect(evidence.endpoints[0]?.hermes).toEqual({ version: '0.18.2+aip-simulator', platform: 'hermes-agent', read_from: 'GET /health', problem: null });
    expect(readFileSync(join(out, 'report.html'), 'utf8')).toContain('embedded Hermes simulator, profile pin (0.18.2+aip-simulator)');
    const checks = evidence.endpoints[0]?.checks ?? [];
    expect(checks.map((check) => check.id)).toEqual(CHECK_IDS);
    expect(checks.every((check) => check.result === 'passed' && check.reason === null)).toBe(true);
    expect(evidence['identities']).toMatchObject({ aip_protocol_version: '1.0', hermes_pinned_revision: '7426c09beee73bdff94d916015bac71384f6bc92' });
    expect(evidence['settings']).toMatchObject({ ledger: { kind: 'memory' } });
    // (2) also proves the ledger: the start is bound to its action, and sending it again is a replay Hermes never sees.
    const start = checks.find((check) => check.id === 'start_and_status')?.evidence as Record<string, Record<string, unknown>>;
    expect(start['binding']).toMatchObject({ run_id: start['run_id'] });
    expect(start['replay']).toMatchObject({
      status: 'completed',
      run_id: start['run_id'],
      replayed: true,
      original_action_id: start['binding']?.['action_id'],
      provider_requests: 0,
    });
    expect(existsSync(join(out, 'report.html'))).toBe(true);

    // The simulator's key is generated inside the CLI (hk_sim_…) and must appear nowhere.
    const written = readFileSync(join(out, 'evidence.json'), 'utf8') + readFileSync(join(out, 'report.html'), 'utf8') + run.stdout;
    expect(written).not.toMatch(/hk_sim_[0-9a-f]+/);
    expect(written).not.toMatch(/Bearer/i);
    expect(written).not.toContain('Use the terminal tool');
  });

  it('passes against the v0.19 profile and records the release it models', async () => {
    const out = join(tempDir(), 'qualification');
    const run = await runCli(['qualify', '--simulate', '--profile', 'v0.19', '--out', out]);
    expect(run.code, run.stdout).toBe(0);
    expect(run.stdout).toMatch(/Qualification PASSED: 8\/8/);
    const evidence = readEvidence(out);
    expect(evidence['target']).toMatchObject({ kind: 'simulator', simulator_profile: 'v0.19' });
    expect(evidence.endpoints[0]?.hermes.version).toBe('0.19.0+aip-simulator');
    // Hermes 0.19.0 declares neither durable run idempotency nor steer.
    expect(evidence.endpoints[0]?.offer).toMatchObject({ source: 'capabilities', durable_run_idempotency: null, run_steer: false });
  });

  it('passes checks 4 and 5 against the v0.22 profile, where the runs of a session take turns, and records that', async () => {
    const out = join(tempDir(), 'qualification');
    await runCli(['qualify', '--simulate', '--profile', 'v0.22', '--out', out]);
    const checks = readEvidence(out).endpoints[0]?.checks ?? [];
    for (const id of ['isolated_approvals', 'approval_requires_evidence']) {
      const check = checks.find((candidate) => candidate.id === id);
      expect(check?.result, `${id}: ${check?.reason}`).toBe('passed');
      expect(check?.evidence).toMatchObject({ session_takes_turns: true, session_turns: { queued_run_approval: { status: 'completed', resolved: 1 } } });
    }
  });

  it('passes against the later profile too, where a restart leaves the run interrupted (check 8: an explained outcome)', async () => {
    const out = join(tempDir(), 'qualification');
    const run = await runCli(['qualify', '--simulate', '--profile', 'later', '--out', out]);
    expect(run.code, run.stdout).toBe(0);
    expect(run.stdout).toContain('(profile later)');
    expect(run.stdout).toMatch(/Qualification PASSED: 8\/8/);
    const loss = readEvidence(out).endpoints[0]?.checks.find((check) => check.id === 'evidence_loss')?.evidence;
    expect(loss).toMatchObject({ method: 'a started run, then a provider restart', interpretation: 'interrupted' });
    expect(loss?.['binding_after']).toMatchObject({ last_status: 'interrupted', evidence_lost: false });
  });

  it('against the v0.22 profile check 8 reports what Hermes keeps of the keyed run: interrupted, and when', async () => {
    const out = join(tempDir(), 'qualification');
    await runCli(['qualify', '--simulate', '--profile', 'v0.22', '--out', out]);
    const check = readEvidence(out).endpoints[0]?.checks.find((candidate) => candidate.id === 'evidence_loss');
    expect(check?.result, check?.reason ?? '').toBe('passed');
    expect(check?.evidence).toMatchObject({ method: 'a started run, then a provider restart', interpretation: 'interrupted' });
    const after = check?.evidence['binding_after'] as { last_status: string; evidence_lost: boolean; interrupted_at: string | null };
    expect(after).toMatchObject({ last_status: 'interrupted', evidence_lost: false });
    expect(Date.parse(after.interrupted_at ?? '')).toBeGreaterThan(0);
    expect(check?.evidence['statement']).toContain(`Hermes marked it interrupted at ${after.interrupted_at}`);
  });
});
