import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { assertMatches } from '../helpers/schema-check.js';
import { SIM_KEY, expectOneErrorLine, runCli, simulatorWithConfig, tempDir } from './helpers.js';

interface Result {
  status: string;
  output?: Record<string, unknown>;
  error?: { code: string };
  receipt?: { http_status?: number; idempotency_key?: string };
}

const parse = (stdout: string): Result => {
  const result = JSON.parse(stdout) as Result;
  assertMatches('aip/action-result.schema.json', result);
  return result;
};

describe('hermes-aip invoke', { timeout: 60_000 }, () => {
  it('starts a run and reads its status, with the key from HERMES_API_KEY', async () => {
    const { sim } = await simulatorWithConfig();
    const env = { HERMES_BASE_URL: sim.url, HERMES_API_KEY: SIM_KEY };
    const start = await runCli(['invoke', 'cap:hermes_agent:default:run_start', '--input', '{"body":{"input":"hello"}}', '--idempotency-key', 'cli-start-1'], {
      env,
    });
    expect(start.code, start.stderr).toBe(0);
    const started = parse(start.stdout);
    expect(started).toMatchObject({ status: 'completed', receipt: { http_status: 202, idempotency_key: 'cli-start-1' } });
    const runId = started.output?.['run_id'] as string;
    expect(sim.run(runId)).toBeDefined();

    const status = await runCli(['invoke', 'cap:hermes_agent:default:run_status', '--input', JSON.stringify({ run_id: runId })], { env });
    expect(status.code).toBe(0);
    expect(parse(status.stdout).output).toMatchObject({ object: 'hermes.run', run_id: runId });
    expect(start.stdout + status.stdout + start.stderr + status.stderr).not.toContain(SIM_KEY);
  });

  it('reads --input and --approval from files and answers an approval with the grant', async () => {
    const { sim, configPath } = await simulatorWithConfig();
    const folder = tempDir();
    const body = {
      input: 'x',
      sim_script: [
        { type: 'approval', command: 'rm -rf ./scratch' },
        { type: 'tool', tool: 'terminal' },
        { type: 'complete', output: 'ok' },
      ],
    };
    writeFileSync(join(folder, 'start.json'), JSON.stringify({ body }));
    const start = await runCli([
      'invoke',
      'cap:hermes_agent:local:run_start',
      '--config',
      configPath,
      '--input',
      `@${join(folder, 'start.json')}`,
      '--idempotency-key',
      'k1',
    ]);
    const runId = parse(start.stdout).output?.['run_id'] as string;
    await expect.poll(() => sim.run(runId)?.status, { timeout: 10_000 }).toBe('waiting_for_approval');

    const input = { run_id: runId, choice: 'once' };
    const now = Date.now();
    const grant = {
      approvalId: 'appr_cli_1',
      decision: 'approved',
      grantedAt: now,
      expiresAt: now + 5 * 60_000,
      evidence: { reason: 'reviewed scratch cleanup', inputSnapshot: input, policyDecision: { policy: 'test', outcome: 'allow' } },
    };
    writeFileSync(join(folder, 'input.json'), JSON.stringify(input));
    writeFileSync(join(folder, 'grant.json'), JSON.stringify(grant));
    const approve = await runCli([
      'invoke',
      'cap:hermes_agent:local:run_approval',
      '--config',
      configPath,
      '--input',
      `@${join(folder, 'input.json')}`,
      '--approval',
      `@${join(folder, 'grant.json')}`,
      '--idempotency-key',
      'k2',
    ]);
    expect(approve.code, approve.stdout).toBe(0);
    expect(parse(approve.stdout).output).toMatchObject({ run_id: runId, choice: 'once', resolved: 1 });
    await expect.poll(() => sim.run(runId)?.status, { timeout: 10_000 }).toBe('completed');
  });

  it('exits 1 and prints the failed result when the connector refuses or Hermes answers an error', async () => {
    const { sim, configPath } = await simulatorWithConfig();
    const noKey = await runCli(['invoke', 'cap:hermes_agent:local:run_start', '--config', configPath, '--input', '{"body":{"input":"x"}}']);
    expect(noKey.code).toBe(1);
    expect(parse(noKey.stdout).error?.code).toBe('connector.hermes_agent.idempotency_key_required');

    const noGrant = await runCli([
      'invoke',
      'cap:hermes_agent:local:run_stop',
      '--config',
      configPath,
      '--input',
      '{"run_id":"run_x"}',
      '--idempotency-key',
      'k',
    ]);
    expect(noGrant.code).toBe(1);
    expect(parse(noGrant.stdout).error?.code).toBe('connector.hermes_agent.approval_required');

    const unknown = await runCli([
      'invoke',
      'cap:hermes_agent:local:run_status',
      '--config',
      configPath,
      '--input',
      '{"run_id":"run_00000000000000000000000000000000"}',
    ]);
    expect(unknown.code).toBe(1);
    expect(parse(unknown.stdout)).toMatchObject({ status: 'failed', error: { code: 'connector.hermes_agent.not_found' } });
    expect(sim.requests.filter((request) => request.method === 'POST')).toHaveLength(0);
  });

  it('passes --tenant to a tenant-bound endpoint and fails closed without it', async () => {
    const { configPath } = await simulatorWithConfig({}, { tenantId: 'tenant-a' });
    const args = ['invoke', 'cap:hermes_agent:local:run_status', '--config', configPath, '--input', '{"run_id":"run_1"}'];
    expect(parse((await runCli(args)).stdout).error?.code).toBe('connector.hermes_agent.tenant_mismatch');
    expect(parse((await runCli([...args, '--tenant', 'tenant-a'])).stdout).error?.code).toBe('connector.hermes_agent.not_found');
  });

  it('rejects an unknown capability id and bad arguments with exit code 2', async () => {
    const { configPath } = await simulatorWithConfig();
    const unknown = await runCli(['invoke', 'cap:hermes_agent:other:run_status', '--config', configPath, '--input', '{}']);
    expect(unknown.code).toBe(2);
    expectOneErrorLine(unknown.stderr, /unknown capability id cap:hermes_agent:other:run_status; this configuration has cap:hermes_agent:local:run_start/);

    const noInput = await runCli(['invoke', 'cap:hermes_agent:local:run_status', '--config', configPath]);
    expect(noInput.code).toBe(2);
    expectOneErrorLine(noInput.stderr, /--input <json\|@file> is required/);

    const badJson = await runCli(['invoke', 'cap:hermes_agent:local:run_status', '--config', configPath, '--input', '{run_id:1}']);
    expect(badJson.code).toBe(2);
    expectOneErrorLine(badJson.stderr, /--input is not valid JSON/);

    const missingFile = await runCli(['invoke', 'cap:hermes_agent:local:run_status', '--config', configPath, '--input', '@/nonexistent/input.json']);
    expect(missingFile.code).toBe(2);
    expectOneErrorLine(missingFile.stderr, '--input: cannot read the file named after @: file not found');
  });
});
