import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileErrorText } from './args.js';
import { UsageError } from './errors.js';

/**
 * Writes each [file name, content] into `dir` (created if needed) and returns their paths in
 * the same order; a failure is one usage error naming `what` and the folder.
 */
export function writeArtifacts(dir: string, files: ReadonlyArray<readonly [string, string]>, what: string): string[] {
  const folder = resolve(dir);
  const paths = files.map(([name]) => join(folder, name));
  try {
    mkdirSync(folder, { recursive: true });
    for (const [index, [, content]] of files.entries()) writeFileSync(paths[index] as string, content);
  } catch (error) {
    throw new UsageError(`cannot write ${what} to ${folder}: ${fileErrorText(error)}`);
  }
  return paths;
}

/** A JSON document as the artifacts keep it: indented, with a final newline. */
export function jsonDocument(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}
