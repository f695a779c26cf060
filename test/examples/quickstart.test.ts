/** examples/quickstart.ts (the README's library code) runs: a started run's events stream, and it completes. */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

describe('examples/quickstart.ts', () => {
  it('prints each chunk as it arrives, then the completed status and the run text; nothing on stderr', { timeout: 60_000 }, async () => {
    const { stdout, stderr } = await promisify(execFile)(`${root}node_modules/.bin/tsx`, [`${root}examples/quickstart.ts`], {
      cwd: root,
      timeout: 50_000,
      env: { PATH: process.env['PATH'] ?? '' },
    });
    expect(stderr).toBe('');
    const lines = stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^data \S/);
    expect(lines.at(-2)).toMatch(/^done \S/);
    expect(lines.at(-1)).toMatch(/^completed \S/);
  });
});
