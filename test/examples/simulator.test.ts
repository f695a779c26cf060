/** examples/simulator.ts (docs/simulator.md's code) runs: the injected 503, then the restarted simulator's 404. */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

describe('examples/simulator.ts', () => {
  it('reads the fault as remote_temporary, then not_found, and records both requests', { timeout: 60_000 }, async () => {
    const { stdout, stderr } = await promisify(execFile)(`${root}node_modules/.bin/tsx`, [`${root}examples/simulator.ts`], {
      cwd: root,
      timeout: 50_000,
      env: { PATH: process.env['PATH'] ?? '' },
    });
    expect(stderr).toBe('');
    expect(stdout.trimEnd()).toBe('connector.hermes_agent.remote_temporary connector.hermes_agent.not_found 2 0');
  });
});
