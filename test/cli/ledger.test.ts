/**
 * The CLI with a durable run ledger (config file "ledger", or HERMES_LEDGER): a start sent
 * again by a later `invoke` with the same idempotency key is a replay, not a second run, and
 * `qualify` records which ledger it used. The PostgreSQL URL is read from the environment and
 * never printed.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PG_URL, createPgSchema } from '../helpers/ledgers.js';
import { SIM_KEY, expectOneErrorLine, readEvidence, runCli, simulatorWithConfig, tempDir } from './helpers.js';

interface Result {
  status: string;
  output?: { run_id?: string };
  receipt?: { replayed?: boolean; original_action_id?: string };
  action_id: string;
}

const START = ['invoke', 'cap:hermes_agent:default:run_start', '--input', '{"body":{"input":"hello"}}', '--idempotency-key', 'cli-ledger-key-1'];

async function startTwice(env: Record<string, string>, sim: { startCount(): number }) {
  const first = await runCli(START, { env });
  expect(first.code, first.stderr).toBe(0);
  const second = await runCli(START, { env });
  expect(second.code, second.stderr).toBe(0);
  const [a, b] = [JSON.parse(first.stdout) as Result, JSON.parse(second.stdout) as Result];
  expect(b.output?.run_id).toBe(a.output?.run_id);
  expect(b.receipt).toMatchObject({ replayed: true, original_action_id: a.action_id });
  expect(sim.startCount()).toBe(1);
  return { first, second };
}

describe('hermes-aip with a run ledger', { timeout: 60_000 }, () => {
  it('HERMES_LEDGER=sqlite:<path>: the same start from two invocations is one run, the second a replay', async () => {
    const { sim } = await simulatorWithConfig();
    const env = { HERMES_BASE_URL: sim.url, HERMES_API_KEY: SIM_KEY, HERMES_LEDGER: `sqlite:${join(tempDir(), 'ledger.db')}` };
    await startTwice(env, sim);
  });

  it('without a ledger each invocation has its own memory: the same start runs again (the control)', async () => {
    const { sim } = await simulatorWithConfig();
    const env = { HERMES_BASE_URL: sim.url, HERMES_API_KEY: SIM_KEY };
    await runCli(START, { env });
    await runCli(START, { env });
    expect(sim.startCount()).toBe(2);
  });

  it.skipIf(!PG_URL)('a config file with { "postgresEnv": VAR }: one run, and the URL never printed', async () => {
    const { sim, folder } = await simulatorWithConfig();
    const { connectionString, drop } = await createPgSchema('aip_cli');
    try {
      const configPath = join(folder, 'with-ledger.json');
      writeFileSync(
        configPath,
        JSON.stringify({ endpoints: [{ id: 'default', baseUrl: sim.url, apiKeyFile: 'hermes.key' }], ledger: { postgresEnv: 'AIP_TEST_LEDGER_URL' } }),
      );
      const env = { AIP_TEST_LEDGER_URL: connectionString };
      const args = (argv: string[]) => [...argv, '--config', configPath];
      const first = await runCli(args(START), { env });
      const second = await runCli(args(START), { env });
      expect([first.code, second.code], first.stderr + second.stderr).toEqual([0, 0]);
      expect((JSON.parse(second.stdout) as Result).receipt?.replayed).toBe(true);
      expect(sim.startCount()).toBe(1);

      const out = join(folder, 'evidence');
      const qualify = await runCli(['qualify', '--config', configPath, '--out', out, '--timeout', '20'], { env });
      expect(qualify.code, qualify.stdout).toBe(0);
      const evidence = readEvidence(out) as unknown as { settings: { ledger: unknown } };
      expect(evidence.settings.ledger).toEqual({ kind: 'postgres', location: 'environment variable AIP_TEST_LEDGER_URL' });
      for (const run of [first, second, qualify]) expect(run.stdout + run.stderr).not.toContain(connectionString);
    } finally {
      await drop();
    }
  });

  it('qualify records the SQLite ledger of the config file, resolved against its folder', async () => {
    const { sim, folder } = await simulatorWithConfig();
    const configPath = join(folder, 'with-ledger.json');
    writeFileSync(configPath, JSON.stringify({ endpoints: [{ id: 'local', baseUrl: sim.url, apiKeyFile: 'hermes.key' }], ledger: { sqlite: 'runs.db' } }));
    const out = join(folder, 'evidence');
    const run = await runCli(['qualify', '--config', configPath, '--out', out, '--timeout', '20']);
    expect(run.code, run.stdout).toBe(0);
    const evidence = readEvidence(out) as unknown as { settings: { ledger: unknown } };
    expect(evidence.settings.ledger).toEqual({ kind: 'sqlite', location: join(folder, 'runs.db') });
  });
});

describe('ledger configuration errors: one line, exit code 2', { timeout: 60_000 }, () => {
  const configWith = (ledger: unknown, extra: Record<string, unknown> = {}) => {
    const path = join(tempDir(), 'endpoints.json');
    writeFileSync(path, JSON.stringify({ endpoints: [{ id: 'prod', baseUrl: 'http://127.0.0.1:9', apiKeyEnv: 'SOME_KEY' }], ledger, ...extra }));
    return path;
  };
  const env = { SOME_KEY: 'hk_some_key_123' };

  it.each([
    ['an unknown ledger kind', { mysql: 'x' }, /"ledger" must be \{ "sqlite": "<path>" \} or \{ "postgresEnv"/],
    ['two ledgers at once', { sqlite: 'a.db', postgresEnv: 'X' }, /"ledger" must be/],
    [
      'a postgresEnv that is not set',
      { postgresEnv: 'AIP_UNSET_LEDGER_URL' },
      /environment variable AIP_UNSET_LEDGER_URL \(its ledger postgresEnv\) is not set/,
    ],
  ])('%s', async (_name, ledger, message) => {
    const run = await runCli(['manifest', '--config', configWith(ledger)], { env });
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, message);
  });

  it('an unknown top-level field in the config file', async () => {
    const run = await runCli(['manifest', '--config', configWith(undefined, { ledgr: { sqlite: 'a.db' } })], { env });
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, /unknown field "ledgr"/);
  });

  it('a HERMES_LEDGER that is neither sqlite: nor a postgres URL, without echoing it', async () => {
    const run = await runCli(['manifest'], {
      env: { HERMES_BASE_URL: 'http://127.0.0.1:9', HERMES_API_KEY: 'hk_x', HERMES_LEDGER: 'mysql://user:secret@db/x' },
    });
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, 'HERMES_LEDGER must be sqlite:<path> or a postgres:// URL');
    expect(run.stderr).not.toContain('secret');
  });
});
