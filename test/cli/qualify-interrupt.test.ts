import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { finished, readEvidence, spawnCli, tempDir, waitForOutput } from './helpers.js';

describe('hermes-aip qualify interrupted by SIGINT', { timeout: 60_000 }, () => {
  it('stops running checks, still cleans up, writes the evidence as interrupted and exits 130', async () => {
    const out = join(tempDir(), 'out');
    const child = spawnCli(['qualify', '--simulate', '--out', out]);
    const done = finished(child, ['qualify']);
    await waitForOutput(child.stdout, 'PASS 1. discovery');
    child.kill('SIGINT');
    const run = await done;
    expect(run.code).toBe(130);
    expect(run.stderr).toContain('hermes-aip: interrupted');
    expect(run.stdout).toMatch(/Qualification INTERRUPTED/);
    const evidence = readEvidence(out);
    expect(evidence.result).toBe('interrupted');
    const last = evidence.endpoints[0]?.checks.at(-1);
    expect(last).toMatchObject({ id: 'evidence_loss', result: 'failed', reason: 'not run: the qualification was interrupted' });
  });
});
