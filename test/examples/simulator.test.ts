/** examples/simulator.ts (docs/simulator.md's code) runs: the injected 503, then the restarted simulator's 404. */
import { describe, expect, it } from 'vitest';
import { runExample } from './run-example.js';

describe('examples/simulator.ts', () => {
  it('reads the fault as remote_temporary, then not_found, and records both requests', { timeout: 60_000 }, async () => {
    const { stdout, stderr } = await runExample('simulator.ts');
    expect(stderr).toBe('');
    expect(stdout.trimEnd()).toBe('connector.hermes_agent.remote_temporary connector.hermes_agent.not_found 2 0');
  });
});
