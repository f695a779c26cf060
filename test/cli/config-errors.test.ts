import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectOneErrorLine, runCli, tempDir } from './helpers.js';

const KEY = 'hk_never_echo_this_4a61c2';

describe('configuration errors: one line on stderr, exit code 2, never a key', { timeout: 60_000 }, () => {
  it('a missing config file', async () => {
    const run = await runCli(['manifest', '--config', join(tempDir(), 'nope.json')]);
    expect(run.code).toBe(2);
    // The path is not quoted: a --config that cannot be read may be a key pasted in the wrong place.
    expectOneErrorLine(run.stderr, 'cannot read the config file given with --config: file not found');
  });

  it('a config file that is not JSON, without quoting its content', async () => {
    const path = join(tempDir(), 'endpoints.json');
    writeFileSync(path, KEY);
    const run = await runCli(['qualify', '--config', path]);
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, /config file .*endpoints\.json is not valid JSON/);
    expect(run.stderr).not.toContain(KEY);
  });

  it('a config file without endpoints', async () => {
    const path = join(tempDir(), 'endpoints.json');
    writeFileSync(path, JSON.stringify({ endpoints: [] }));
    const run = await runCli(['manifest', '--config', path]);
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, /with at least one endpoint/);
  });

  it('a key file that does not exist (resolved against the config folder)', async () => {
    const folder = tempDir();
    const path = join(folder, 'endpoints.json');
    writeFileSync(path, JSON.stringify({ endpoints: [{ id: 'prod', baseUrl: 'http://127.0.0.1:9', apiKeyFile: 'keys/prod.key' }] }));
    const run = await runCli(['invoke', 'cap:hermes_agent:prod:run_status', '--input', '{"run_id":"run_1"}', '--config', path]);
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, `cannot read apiKeyFile ${join(folder, 'keys/prod.key')}: file not found`);
  });

  it('an apiKeyEnv variable that is not set', async () => {
    const path = join(tempDir(), 'endpoints.json');
    writeFileSync(path, JSON.stringify({ endpoints: [{ id: 'prod', baseUrl: 'http://127.0.0.1:9', apiKeyEnv: 'PROD_HERMES_KEY' }] }));
    const run = await runCli(['manifest', '--config', path]);
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, /environment variable PROD_HERMES_KEY .*is not set/);
  });

  it('a key written into the config file itself', async () => {
    const path = join(tempDir(), 'endpoints.json');
    writeFileSync(path, JSON.stringify({ endpoints: [{ id: 'prod', baseUrl: 'http://127.0.0.1:9', apiKey: KEY }] }));
    const run = await runCli(['manifest', '--config', path]);
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, /"apiKey" is not read from the config file; use "apiKeyFile" or "apiKeyEnv"/);
    expect(run.stderr).not.toContain(KEY);
  });

  it('an endpoint the connector refuses (not a normalized id)', async () => {
    const path = join(tempDir(), 'endpoints.json');
    writeFileSync(path, JSON.stringify({ endpoints: [{ id: 'Prod 1', baseUrl: 'http://127.0.0.1:9', apiKeyEnv: 'K' }] }));
    const run = await runCli(['manifest', '--config', path], { env: { K: KEY } });
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, /invalid configuration .*endpoints\[0\]\.id/);
    expect(run.stderr).not.toContain(KEY);
  });

  it.each([['--api-key', KEY], [`--api-key=${KEY}`], ['--token', KEY], ['--key', KEY]])(
    'a key given on the command line is not an option: %s',
    async (...args) => {
      const run = await runCli(['manifest', ...args]);
      expect(run.code).toBe(2);
      expectOneErrorLine(run.stderr, /secrets are never taken from the command line; API keys come from apiKeyFile or apiKeyEnv/);
      expect(run.stderr + run.stdout).not.toContain(KEY);
    },
  );

  it('no --config and no HERMES_BASE_URL/HERMES_API_KEY', async () => {
    const run = await runCli(['manifest']);
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, /no endpoint configured: pass --config FILE, or set HERMES_BASE_URL and HERMES_API_KEY/);
  });

  it('HERMES_BASE_URL without HERMES_API_KEY', async () => {
    const run = await runCli(['manifest'], { env: { HERMES_BASE_URL: 'http://127.0.0.1:9' } });
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, /HERMES_BASE_URL is set but HERMES_API_KEY is not/);
  });

  it('--simulate together with --config', async () => {
    const run = await runCli(['qualify', '--simulate', '--config', 'endpoints.json']);
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, /--simulate and --config exclude each other/);
  });
});
