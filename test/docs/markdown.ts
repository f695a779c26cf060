/** The project's Markdown documents and their fenced code blocks, for the docs tests. */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const root = fileURLToPath(new URL('../../', import.meta.url));

/** README, CONTRIBUTING, CHANGELOG and every guide under docs/, as paths relative to the root. */
export function markdownFiles(): string[] {
  const guides = readdirSync(`${root}docs`)
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`);
  return ['README.md', 'CONTRIBUTING.md', 'CHANGELOG.md', ...guides];
}

export interface CodeBlock {
  file: string;
  language: string;
  code: string;
}

export function codeBlocks(file: string): CodeBlock[] {
  const text = readFileSync(`${root}${file}`, 'utf8');
  return [...text.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((match) => ({ file, language: match[1] ?? '', code: match[2] ?? '' }));
}
