/**
 * The packages installed in a node_modules tree: every `node_modules/<name>` and
 * `node_modules/@scope/<name>` folder with a package.json, nested trees included (the same
 * locations as a package-lock.json's `packages` keys). Shared by the image build's stage check
 * and the image test that holds the SBOM against the image's /app/node_modules.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface InstalledPackage {
  /** Location relative to the project root, as a lockfile key: `node_modules/a/node_modules/@s/b`. */
  location: string;
  name: string;
  version: string;
}

export function installedPackages(projectRoot: string): InstalledPackage[] {
  const found: InstalledPackage[] = [];
  const visit = (location: string): void => {
    const folder = join(projectRoot, location);
    if (!existsSync(folder)) return;
    for (const entry of readdirSync(folder, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      if (!entry.isDirectory() || entry.name.startsWith('.')) continue;
      if (entry.name.startsWith('@')) {
        for (const scoped of readdirSync(join(folder, entry.name), { withFileTypes: true })) {
          if (scoped.isDirectory()) add(`${location}/${entry.name}/${scoped.name}`);
        }
      } else {
        add(`${location}/${entry.name}`);
      }
    }
  };
  const add = (location: string): void => {
    const manifest = join(projectRoot, location, 'package.json');
    if (!existsSync(manifest)) return;
    const { name, version } = JSON.parse(readFileSync(manifest, 'utf8')) as { name: string; version: string };
    found.push({ location, name, version });
    visit(`${location}/node_modules`);
  };
  visit('node_modules');
  return found;
}
