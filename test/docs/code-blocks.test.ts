/**
 * Every code example in the docs is real: each ```ts block stands word for word in a file of
 * examples/ (its imports anywhere in that file), and each example has a test that runs it; each
 * ```json block parses; each `hermes-aip` command of a ```sh block exists (its --help exits 0), and
 * each `npm run` script and each file a block runs exists.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { codeBlocks, markdownFiles, root, type CodeBlock } from './markdown.js';

const blocks = markdownFiles().flatMap(codeBlocks);
const examples = readdirSync(`${root}examples`).filter((name) => name.endsWith('.ts'));
const exampleTexts = examples.map((name) => ({ name, text: readFileSync(`${root}examples/${name}`, 'utf8') }));

function ofLanguage(language: string): CodeBlock[] {
  return blocks.filter((block) => block.language === language);
}

/** The block's import lines and the rest of it (from its first line that is neither an import nor blank). */
function splitImports(code: string): { imports: string[]; body: string } {
  const lines = code.split('\n');
  const imports = lines.filter((line) => line.startsWith('import '));
  const firstBody = lines.findIndex((line) => !line.startsWith('import ') && line.trim() !== '');
  return { imports, body: firstBody < 0 ? '' : lines.slice(firstBody).join('\n') };
}

describe('the docs’ code blocks', () => {
  it('finds the blocks it checks', () => {
    expect(ofLanguage('ts').length).toBeGreaterThanOrEqual(5);
    expect(ofLanguage('json').length).toBeGreaterThanOrEqual(3);
    expect(ofLanguage('sh').length).toBeGreaterThanOrEqual(3);
  });

  it.each(ofLanguage('ts').map((block) => [block.file, block] as const))('a ts block of %s stands in one example word for word', (_file, block) => {
    const { imports, body } = splitImports(block.code);
    const home = exampleTexts.find(({ text }) => text.includes(body) && imports.every((line) => text.includes(line)));
    expect(home, `no file in examples/ holds:\n${block.code}`).toBeDefined();
  });

  it('has a test that runs each example', () => {
    for (const name of examples) {
      const test = `${root}test/examples/${name.replace(/\.ts$/, '.test.ts')}`;
      expect(existsSync(test), test).toBe(true);
      expect(readFileSync(test, 'utf8')).toContain(`examples/${name}`);
    }
  });

  it.each(ofLanguage('json').map((block) => [block.file, block] as const))('a json block of %s parses', (_file, block) => {
    expect(() => JSON.parse(block.code)).not.toThrow();
  });

  it('names only npm scripts, files and hermes-aip commands that exist', { timeout: 60_000 }, async () => {
    const scripts = Object.keys((JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { scripts: Record<string, string> }).scripts);
    const lines = ofLanguage('sh').flatMap((block) => block.code.split('\n'));
    const commands = new Set<string>();
    for (const line of lines) {
      const npmRun = /^npm run ([\w:-]+)/.exec(line);
      if (npmRun) expect(scripts, line).toContain(npmRun[1]);
      const ran = /^npx (?:tsx|vitest run) (\S+)/.exec(line);
      if (ran) expect(existsSync(`${root}${ran[1]}`), line).toBe(true);
      const cli = /^hermes-aip ([a-z-]+)/.exec(line);
      if (cli) commands.add(cli[1] as string);
    }
    expect(commands.size).toBeGreaterThanOrEqual(4);
    for (const command of commands) {
      await expect(promisify(execFile)(process.execPath, [`${root}dist/cli/main.js`, command, '--help']), command).resolves.toBeDefined();
    }
  });
});
