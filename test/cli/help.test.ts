import { describe, expect, it } from 'vitest';
import { CHECK_IDS, expectOneErrorLine, runCli } from './helpers.js';

describe('hermes-aip --help', { timeout: 60_000 }, () => {
  it('prints the top-level help with every command and exits 0', async () => {
    for (const flag of ['--help', '-h', 'help']) {
      const run = await runCli([flag]);
      expect(run.code).toBe(0);
      expect(run.stderr).toBe('');
      for (const command of ['manifest', 'invoke', 'qualify', 'simulate', 'fake-model']) expect(run.stdout).toContain(command);
      expect(run.stdout).toContain('HERMES_API_KEY');
    }
  });

  it.each([
    ['manifest', 'hermes-aip manifest'],
    ['invoke', 'hermes-aip invoke <capability-id> --input'],
    ['qualify', 'hermes-aip qualify'],
    ['simulate', 'hermes-aip simulate'],
    ['fake-model', 'hermes-aip fake-model'],
  ])('prints the help of %s and exits 0 without doing anything else', async (command, usage) => {
    const run = await runCli([command, '--help']);
    expect(run.code).toBe(0);
    expect(run.stderr).toBe('');
    expect(run.stdout).toContain(`Usage: ${usage}`);
    expect(run.stdout).toContain('--help');
  });

  it('lists the eight checks in the qualify help', async () => {
    const run = await runCli(['qualify', '-h']);
    for (const check of CHECK_IDS) {
      expect(run.stdout).toContain(check);
    }
  });

  it('prints the help on stderr and exits 2 without a command', async () => {
    const run = await runCli([]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('Usage:');
  });

  it('rejects an unknown command with one line and exit code 2', async () => {
    const run = await runCli(['qualfy']);
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, /unknown command "qualfy"/);
  });

  it('rejects an unknown option with one line and exit code 2', async () => {
    const run = await runCli(['qualify', '--simulte']);
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, /Unknown option '--simulte'/);
  });
});
