/** examples/run-ledger.ts (docs/run-ledger.md's code) runs: the repeated start is a replay and Hermes saw one run. */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

describe('examples/run-ledger.ts', () => {
  it('answers the second start from the ledger, with the first run’s evidence, and starts one run', { timeout: 60_000 }, async () => {
    const { stdout, stderr } = await promisify(execFile)(`${root}node_modules/.bin/tsx`, [`${root}examples/run-ledger.ts`], {
      cwd: root,
      timeout: 50_000,
      env: { PATH: process.env['PATH'] ?? '' },
    });
    expect(stderr).toBe('');
    expect(stdout.trimEnd().split('\n')).toEqual([expect.stringMatching(/^completed completed true run_[0-9a-f]{32}$/), 'runs started in Hermes: 1']);
  });
});
