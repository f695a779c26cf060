/** Runs one file of examples/ with tsx, as a reader would (`npx tsx examples/<name>`), with nothing of this process's environment but PATH. */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const root = fileURLToPath(new URL('../../', import.meta.url));

export function runExample(name: string): Promise<{ stdout: string; stderr: string }> {
  return promisify(execFile)(`${root}node_modules/.bin/tsx`, [`${root}examples/${name}`], {
    cwd: root,
    timeout: 50_000,
    env: { PATH: process.env['PATH'] ?? '' },
  });
}
