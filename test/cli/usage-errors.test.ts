/**
 * Usage errors and interrupts: a bad ledger setting is a clear configuration error (exit 2), an
 * interrupted invoke exits 130, and no usage error ever echoes an argument's value: a key pasted
 * in the wrong place must not end up in a terminal log.
 */
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectOneErrorLine, finished, runCli, simulatorWithConfig, spawnCli, tempDir, waitForOutput } from './helpers.js';

/** Looks like a live key; it must appear in no output. */
const FAKE_KEY = 'sk_live_9f8e7d6c5b4a39281706f5e4d3c2b1a0';

describe('hermes-aip: a bad HERMES_LEDGER setting', { timeout: 60_000 }, () => {
  it.each([
    ['a folder that does not exist', (folder: string) => `sqlite:${join(folder, 'missing', 'runs.db')}`, /run ledger .*runs\.db: its folder does not exist/],
    ['a directory', (folder: string) => `sqlite:${folder}`, /run ledger .*: it is a directory/],
    [
      'a file that is not a database',
      (folder: string) => {
        writeFileSync(join(folder, 'notes.db'), 'not a database, just text\n'.repeat(100));
        return `sqlite:${join(folder, 'notes.db')}`;
      },
      /run ledger .*notes\.db: .*not a database/,
    ],
    [
      'a file its group or others may write',
      (folder: string) => {
        writeFileSync(join(folder, 'shared.db'), '');
        chmodSync(join(folder, 'shared.db'), 0o666);
        return `sqlite:${join(folder, 'shared.db')}`;
      },
      /shared\.db is writable by its group or others \(mode 0666\)/,
    ],
  ])('%s: one clear line and exit 2, for invoke and manifest', async (_name, setting, message) => {
    const folder = tempDir();
    const env = { HERMES_BASE_URL: 'http://127.0.0.1:9', HERMES_API_KEY: 'hk_ledger_test', HERMES_LEDGER: setting(folder) };
    for (const args of [['invoke', 'cap:hermes_agent:default:run_status', '--input', '{"run_id":"run_1"}'], ['manifest']]) {
      const run = await runCli(args, { env });
      expect(run.code, run.stderr).toBe(2);
      expectOneErrorLine(run.stderr, message);
      expect(run.stderr).not.toContain('unexpected error');
      expect(run.stdout).toBe('');
    }
  });

  it('the same from a config file\'s "ledger" field', async () => {
    const { configPath, folder } = await simulatorWithConfig();
    mkdirSync(join(folder, 'ledger-dir'));
    writeFileSync(
      configPath,
      JSON.stringify({ endpoints: [{ id: 'local', baseUrl: 'http://127.0.0.1:9', apiKeyFile: 'hermes.key' }], ledger: { sqlite: 'ledger-dir' } }),
    );
    const run = await runCli(['manifest', '--config', configPath]);
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, /run ledger .*ledger-dir: it is a directory/);
  });
});

describe('hermes-aip invoke interrupted', { timeout: 60_000 }, () => {
  it('SIGINT during a run_events stream exits 130, as documented', async () => {
    const { configPath } = await simulatorWithConfig();
    const start = await runCli([
      'invoke',
      'cap:hermes_agent:local:run_start',
      '--config',
      configPath,
      '--idempotency-key',
      'interrupt-1',
      '--input',
      JSON.stringify({
        body: {
          input: 'x',
          sim_script: [
            { type: 'delta', text: 'Working' },
            { type: 'sleep', ms: 30_000 },
            { type: 'complete', output: 'late' },
          ],
        },
      }),
    ]);
    const runId = (JSON.parse(start.stdout) as { output: { run_id: string } }).output.run_id;
    const child = spawnCli(['invoke', 'cap:hermes_agent:local:run_events', '--config', configPath, '--input', JSON.stringify({ run_id: runId })]);
    const done = finished(child, ['run_events']);
    await waitForOutput(child.stdout, '"Working"');
    child.kill('SIGINT');
    const run = await done;
    expect(run.code, run.stderr).toBe(130);
    const result = JSON.parse(run.stdout.trimEnd().split('\n').pop() as string) as { status: string };
    expect(result.status).toBe('cancelled');
  });
});

describe('hermes-aip usage errors never echo an argument value', { timeout: 60_000 }, () => {
  it('a key-looking value in any bad-argument position: exit 2, and the value appears nowhere', async () => {
    const { configPath } = await simulatorWithConfig();
    const cap = 'cap:hermes_agent:local:run_status';
    const cases: string[][] = [
      [FAKE_KEY],
      ['invoke', FAKE_KEY, '--config', configPath, '--input', '{"run_id":"r"}'],
      ['invoke', cap, FAKE_KEY, '--config', configPath, '--input', '{"run_id":"r"}'],
      ['invoke', cap, '--config', configPath, '--input', FAKE_KEY],
      ['invoke', cap, '--config', configPath, '--input', `@${FAKE_KEY}`],
      ['invoke', cap, '--config', configPath, '--input', '{"run_id":"r"}', '--approval', FAKE_KEY],
      ['invoke', cap, '--config', configPath, '--input', '{"run_id":"r"}', '--approval', `@${FAKE_KEY}`],
      ['invoke', cap, '--config', FAKE_KEY, '--input', '{"run_id":"r"}'],
      ['manifest', '--config', FAKE_KEY],
      ['manifest', FAKE_KEY],
      ['qualify', FAKE_KEY],
      ['qualify', `--${FAKE_KEY}`],
      ['qualify', `--simulate=${FAKE_KEY}`],
      ['qualify', '--simulate', '--timeout', FAKE_KEY],
      ['qualify', '--simulate', '--profile', FAKE_KEY],
      ['qualify', '--config', FAKE_KEY],
      ['simulate', '--port', FAKE_KEY],
      ['simulate', FAKE_KEY],
      ['invoke', '--api-key', FAKE_KEY],
    ];
    for (const args of cases) {
      const run = await runCli(args);
      expect(run.code, `${args.join(' ')}: ${run.stderr}`).toBe(2);
      expectOneErrorLine(run.stderr, /./);
      expect(run.stdout + run.stderr, args.join(' ')).not.toContain(FAKE_KEY);
      // Not even a recognizable part of it.
      expect(run.stdout + run.stderr, args.join(' ')).not.toContain(FAKE_KEY.slice(8, 24));
    }
  });

  it('bad JSON in --input, --approval, @file or --config: its position and the kind of error, and no text of it', async () => {
    const { configPath, folder } = await simulatorWithConfig();
    const cap = 'cap:hermes_agent:local:run_status';
    const pasted = `{"run_id": ${FAKE_KEY}}`;
    const file = (name: string, text: string) => {
      writeFileSync(join(folder, name), text);
      return `@${join(folder, name)}`;
    };
    const badConfig = join(folder, 'bad-config.json');
    writeFileSync(badConfig, `{\n  "endpoints": [\n    { "id": "local", "apiKeyFile": "${FAKE_KEY}\n  ]\n}\n`);
    const cases: Array<{ args: string[]; line: string }> = [
      { args: ['invoke', cap, '--config', configPath, '--input', pasted], line: '--input is not valid JSON: unexpected character at line 1, column 12' },
      {
        args: ['invoke', cap, '--config', configPath, '--input', '{"run_id":"r"}', '--approval', pasted],
        line: '--approval is not valid JSON: unexpected character at line 1, column 12',
      },
      {
        args: ['invoke', cap, '--config', configPath, '--input', file('input.json', `{\n  "run_id": "r",\n  "note": ${FAKE_KEY}\n}`)],
        line: '--input is not valid JSON (the file named after @): unexpected character at line 3, column 11',
      },
      {
        args: ['invoke', cap, '--config', configPath, '--input', '{"run_id":"r"}', '--approval', file('grant.json', `{"approvalId": "${FAKE_KEY}`)],
        line: '--approval is not valid JSON (the file named after @): unterminated string at line 1, column 16',
      },
      { args: ['manifest', '--config', badConfig], line: `config file ${badConfig} is not valid JSON: control character in a string at line 3, column 77` },
    ];
    for (const { args, line } of cases) {
      const run = await runCli(args);
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr).toBe(`hermes-aip: ${line}\n`);
    }
  });

  it('a mistyped command or option is still named, and a capability id is still shown', async () => {
    const { configPath } = await simulatorWithConfig();
    expectOneErrorLine((await runCli(['qualfy'])).stderr, /unknown command "qualfy"/);
    expectOneErrorLine((await runCli(['qualify', '--simulte'])).stderr, /unknown option '--simulte'/i);
    const unknown = await runCli(['invoke', 'cap:hermes_agent:other:run_status', '--config', configPath, '--input', '{}']);
    expectOneErrorLine(unknown.stderr, /unknown capability id cap:hermes_agent:other:run_status; this configuration has/);
  });
});
