/** examples/quickstart.ts (the README's library code) runs: a started run's events stream, and it completes. */
import { describe, expect, it } from 'vitest';
import { runExample } from './run-example.js';

describe('examples/quickstart.ts', () => {
  it('prints each chunk as it arrives, then the completed status and the run text; nothing on stderr', { timeout: 60_000 }, async () => {
    const { stdout, stderr } = await runExample('quickstart.ts');
    expect(stderr).toBe('');
    const lines = stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^data \S/);
    expect(lines.at(-2)).toMatch(/^done \S/);
    expect(lines.at(-1)).toMatch(/^completed \S/);
  });
});
