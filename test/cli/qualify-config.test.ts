import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CHECK_IDS, SIM_KEY, readEvidence, runCli, simulatorWithConfig } from './helpers.js';

describe('hermes-aip qualify --config against an external simulator', { timeout: 60_000 }, () => {
  it('uses the prompts (no scripts), passes all eight checks and records the endpoint identities without the key', async () => {
    const { sim, configPath, folder } = await simulatorWithConfig({}, { tenantId: 'tenant-a', displayName: 'Local Hermes' });
    const out = join(folder, 'evidence');
    const run = await runCli(['qualify', '--config', configPath, '--out', out, '--timeout', '20']);
    expect(run.code, run.stdout).toBe(0);
    expect(run.stdout).toMatch(/Qualification PASSED: 8\/8/);

    const evidence = readEvidence(out);
    const endpoint = evidence.endpoints[0];
    expect(endpoint).toMatchObject({
      endpoint_id: 'local',
      display_name: 'Local Hermes',
      base_url: sim.url,
      tenant_binding: 'tenant-a',
      credential_revision: createHash('sha256').update(SIM_KEY).digest('hex').slice(0, 12),
      credential_source: `apiKeyFile ${join(folder, 'hermes.key')}`,
    });
    expect(endpoint?.checks.map((check) => check.result)).toEqual(CHECK_IDS.map(() => 'passed'));
    // Not --simulate: a live target, named by the version its /health reports (here the simulator's own).
    expect(evidence['target']).toMatchObject({ kind: 'live', simulator_profile: null });
    expect(endpoint?.hermes).toEqual({ version: '0.18.2+aip-simulator', platform: 'hermes-agent', read_from: 'GET /health', problem: null });
    const report = readFileSync(join(out, 'report.html'), 'utf8');
    expect(report).toContain('live Hermes 0.18.2+aip-simulator');
    expect(report).not.toContain('embedded Hermes simulator');

    // No sim_script: the simulator ran its prompt-driven scripts, an approval for the default prompt's recursive delete.
    const starts = sim.requests.filter((request) => request.method === 'POST' && request.path === '/v1/runs');
    expect(starts.length).toBeGreaterThanOrEqual(7);
    expect(starts.every((request) => !request.body.includes('sim_script'))).toBe(true);
    expect(starts.some((request) => /rm -rf \.\/aip-qualification-scratch-[0-9a-f]{12}/.test(request.body))).toBe(true);
    expect(starts.every((request) => request.headers['x-aip-tenant-id'] === 'tenant-a')).toBe(true);

    // Cleanup: nothing left waiting or running on the endpoint.
    expect(sim.runs().filter((simRun) => !['completed', 'failed', 'cancelled'].includes(simRun.status))).toEqual([]);

    const everything = run.stdout + run.stderr + readFileSync(join(out, 'evidence.json'), 'utf8') + readFileSync(join(out, 'report.html'), 'utf8');
    expect(everything).not.toContain(SIM_KEY);
  });

  it('fails every check that needs Hermes, with the reason, when the key is wrong', async () => {
    const { configPath, folder } = await simulatorWithConfig({ apiKey: 'hk_the_real_key_77' });
    const run = await runCli(['qualify', '--config', configPath, '--out', join(folder, 'out'), '--timeout', '5']);
    expect(run.code).toBe(1);
    const evidence = readEvidence(join(folder, 'out'));
    const failed = evidence.endpoints[0]?.checks.filter((check) => check.result === 'failed') ?? [];
    expect(failed.map((check) => check.id)).toEqual(CHECK_IDS.slice(1));
    expect(failed[0]?.reason).toMatch(/connector\.hermes_agent\.authentication/);
    // /health needs no key: the version is read all the same.
    expect(evidence.endpoints[0]?.hermes.version).toBe('0.18.2+aip-simulator');
  });

  it('records why the version is unknown when GET /health does not answer with one', async () => {
    const { sim, configPath, folder } = await simulatorWithConfig();
    sim.injectFault({ route: 'health', response: { status: 503, body: '{}' } });
    const run = await runCli(['qualify', '--config', configPath, '--out', join(folder, 'out'), '--timeout', '20']);
    expect(run.code, run.stdout).toBe(0);
    const evidence = readEvidence(join(folder, 'out'));
    expect(evidence.endpoints[0]?.hermes).toEqual({ version: null, platform: null, read_from: 'GET /health', problem: 'GET /health answered HTTP 503' });
    expect(readFileSync(join(folder, 'out', 'report.html'), 'utf8')).toContain('unknown: GET /health answered HTTP 503');
  });
});
