/**
 * The soak in its bounded form inside `npm test`: a child process (so that --expose-gc applies)
 * runs test/soak/main.ts for 3 seconds with 200 concurrent lifecycles; it must exit 0 and print
 * every invariant as ok.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const INVARIANTS = [
  'one-result-per-action',
  'one-final-chunk-per-stream',
  'no-duplicate-start-per-key',
  'no-open-socket-after-close',
  'no-listener-left',
  'no-tcp-handle-after-shutdown',
  'no-max-listeners-warning',
  'no-unhandled-rejection-or-exception',
  'heap-recovered',
];

function runSoak(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', 'test/soak/main.ts', ...args], {
      cwd: ROOT,
      env: { ...process.env, CI: 'true' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (data: Buffer) => (stdout += data.toString()));
    child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('soak (bounded: 3 s, 200 concurrent lifecycles, random faults)', () => {
  it('exits 0 with every invariant ok', async () => {
    const { code, stdout, stderr } = await runSoak(['--seconds', '3']);
    const lines = stdout.split('\n');
    const verdicts = Object.fromEntries(
      INVARIANTS.map((name) => [
        name,
        lines
          .find((line) => line.startsWith(`invariant ${name}: `))
          ?.split(': ')[1]
          ?.split(' ')[0],
      ]),
    );
    expect(verdicts, `${stdout}\n${stderr}`).toEqual(Object.fromEntries(INVARIANTS.map((name) => [name, 'ok'])));
    expect(stdout).toMatch(/^soak: \d+ lifecycles, \d+ actions, \d+ streams, \d+ injected faults/m);
    expect(lines).toContain('soak: PASS');
    expect(code, stdout).toBe(0);
  }, 180_000);
});
