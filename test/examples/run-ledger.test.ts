/** examples/run-ledger.ts (docs/run-ledger.md's code) runs: the repeated start is a replay and Hermes saw one run. */
import { describe, expect, it } from 'vitest';
import { runExample } from './run-example.js';

describe('examples/run-ledger.ts', () => {
  it('answers the second start from the ledger, with the first run’s evidence, and starts one run', { timeout: 60_000 }, async () => {
    const { stdout, stderr } = await runExample('run-ledger.ts');
    expect(stderr).toBe('');
    expect(stdout.trimEnd().split('\n')).toEqual([expect.stringMatching(/^completed completed true run_[0-9a-f]{32}$/), 'runs started in Hermes: 1']);
  });
});
