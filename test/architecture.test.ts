/** The source tree has no import cycles: each module depends only on what sits below it. */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('../src/', import.meta.url));
const IMPORT = /(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+?)\.js['"]/g;

function sourceFiles(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

function importGraph(): Map<string, string[]> {
  const files = sourceFiles(SRC);
  const known = new Set(files);
  return new Map(
    files.map((file) => {
      const targets = [...readFileSync(file, 'utf8').matchAll(IMPORT)].map((match) => normalize(join(dirname(file), `${match[1]}.ts`)));
      return [file, targets.filter((target) => known.has(target))];
    }),
  );
}

/** Every cycle's path, found by depth-first search (each cycle reported from one of its modules). */
function cycles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (file: string): void => {
    state.set(file, 'open');
    stack.push(file);
    for (const target of graph.get(file) ?? []) {
      if (state.get(target) === 'open') found.push([...stack.slice(stack.indexOf(target)), target].map((path) => path.slice(SRC.length)));
      else if (!state.has(target)) visit(target);
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of graph.keys()) if (!state.has(file)) visit(file);
  return found;
}

describe('src/ imports', () => {
  it('form no cycle', () => {
    const graph = importGraph();
    expect(graph.size).toBeGreaterThan(50);
    expect(cycles(graph)).toEqual([]);
  });

  it('the check finds a cycle when there is one', () => {
    const graph = new Map([
      [`${SRC}a.ts`, [`${SRC}b.ts`]],
      [`${SRC}b.ts`, [`${SRC}a.ts`]],
    ]);
    expect(cycles(graph)).toEqual([['a.ts', 'b.ts', 'a.ts']]);
  });
});
