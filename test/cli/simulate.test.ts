import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { finished, runCli, spawnCli, waitForOutput } from './helpers.js';

function field(stdout: string, label: string): string {
  const match = new RegExp(`^${label}: (.+)$`, 'm').exec(stdout);
  if (!match?.[1]) throw new Error(`no "${label}" line in ${stdout}`);
  return match[1];
}

describe('hermes-aip simulate', { timeout: 60_000 }, () => {
  it('serves with a generated key kept in a private file, answers the CLI through its endpoints file, and stops on SIGTERM', async () => {
    const child = spawnCli(['simulate', '--port', '0']);
    const done = finished(child, ['simulate']);
    const banner = await waitForOutput(child.stdout, 'Stop with Ctrl-C.');
    const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(banner)?.[1];
    expect(url).toBeDefined();
    const endpointsPath = field(banner, 'Endpoints file');
    const keyPath = join(dirname(endpointsPath), 'api-key');
    expect(field(banner, 'API key')).toBe(`generated, in ${keyPath} (not printed)`);
    expect(statSync(keyPath).mode & 0o777).toBe(0o600);
    const key = readFileSync(keyPath, 'utf8').trim();
    expect(banner).not.toContain(key);
    expect(JSON.parse(readFileSync(endpointsPath, 'utf8'))).toEqual({ endpoints: [{ id: 'simulator', baseUrl: url, apiKeyFile: 'api-key' }] });

    const status = await runCli(['invoke', 'cap:hermes_agent:simulator:run_status', '--config', endpointsPath, '--input', '{"run_id":"run_0"}']);
    expect(JSON.parse(status.stdout)).toMatchObject({ error: { code: 'connector.hermes_agent.not_found' } });
    expect((await fetch(`${url}/v1/runs/run_0`)).status).toBe(401);

    child.kill('SIGTERM');
    const run = await done;
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('Simulator stopped.');
    expect(existsSync(dirname(endpointsPath))).toBe(false);
  });

  it('uses HERMES_API_KEY when set and names it as the key source', async () => {
    const child = spawnCli(['simulate', '--port', '0', '--profile', 'later'], { env: { HERMES_API_KEY: 'hk_from_the_environment_1' } });
    const done = finished(child, ['simulate']);
    const banner = await waitForOutput(child.stdout, 'Stop with Ctrl-C.');
    expect(banner).toContain('(profile later)');
    expect(field(banner, 'API key')).toBe('from HERMES_API_KEY');
    expect(banner).not.toContain('hk_from_the_environment_1');
    const endpointsPath = field(banner, 'Endpoints file');
    expect(JSON.parse(readFileSync(endpointsPath, 'utf8')).endpoints[0].apiKeyEnv).toBe('HERMES_API_KEY');
    const url = /listening on (\S+)/.exec(banner)?.[1] as string;
    expect((await fetch(`${url}/v1/runs/run_0`, { headers: { authorization: 'Bearer hk_from_the_environment_1' } })).status).toBe(404);
    child.kill('SIGINT');
    expect((await done).code).toBe(0);
  });

  it('rejects a bad port or profile with exit code 2', async () => {
    expect((await runCli(['simulate', '--port', '70000'])).code).toBe(2);
    const run = await runCli(['simulate', '--profile', 'newest']);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe('hermes-aip: simulate: --profile must be one of pin, v0.19, v0.20, v0.22, later\n');
  });
});
