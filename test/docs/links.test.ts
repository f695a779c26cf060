/** Every relative link of the docs resolves: the file exists and, with a #fragment, so does the heading. */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { markdownFiles, root } from './markdown.js';

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
function anchorsOf(file: string): Set<string> {
  const text = readFileSync(`${root}${file}`, 'utf8').replace(/^```[\s\S]*?^```$/gm, '');
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const match of text.matchAll(/^#{1,6} (.+)$/gm)) {
    const slug = (match[1] as string)
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

function relativeLinks(file: string): string[] {
  const text = readFileSync(`${root}${file}`, 'utf8').replace(/^```[\s\S]*?^```$/gm, '');
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1] as string).filter((target) => !/^[a-z]+:/.test(target));
}

describe('links in the docs', () => {
  it.each(markdownFiles())('every relative link of %s resolves', (file) => {
    for (const link of relativeLinks(file)) {
      const [path, fragment] = link.split('#') as [string, string | undefined];
      const target = path === '' ? file : relative(root, normalize(join(dirname(`${root}${file}`), path)));
      expect(existsSync(`${root}${target}`), `${file}: ${link}`).toBe(true);
      if (fragment !== undefined) expect([...anchorsOf(target)], `${file}: ${link}`).toContain(fragment);
    }
  });

  it('finds links to check, including one with a fragment', () => {
    const links = markdownFiles().flatMap(relativeLinks);
    expect(links.length).toBeGreaterThan(20);
    expect(links.some((link) => link.includes('#'))).toBe(true);
  });
});

describe('the package', () => {
  it('ships README, every guide and every file they link to', { timeout: 60_000 }, async () => {
    const { stdout } = await promisify(execFile)('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root });
    const shipped = new Set((JSON.parse(stdout) as [{ files: { path: string }[] }])[0].files.map((entry) => entry.path));
    const documents = markdownFiles();
    for (const file of documents) expect(shipped, file).toContain(file);
    for (const file of documents) {
      for (const link of relativeLinks(file)) {
        const path = link.split('#')[0] as string;
        if (path !== '') expect(shipped, `${file}: ${link}`).toContain(relative(root, normalize(join(dirname(`${root}${file}`), path))));
      }
    }
  });
});
