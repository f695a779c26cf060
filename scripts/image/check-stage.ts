/**
 * `tsx scripts/image/check-stage.ts <package-lock.json> <stage>`: fails unless every package that
 * `npm ci` put into the image's staging tree sits at a location the project's lockfile names, with
 * the lockfile's name and version. The staging install adds pg and better-sqlite3 (devDependencies
 * of the project, optional peers of the package) as dependencies, so this is the proof that it
 * resolved nothing the lockfile does not pin.
 */
import { readFileSync } from 'node:fs';
import { installedPackages } from './node-modules.js';

const [lockPath, stage] = process.argv.slice(2);
if (!lockPath || !stage) throw new Error('usage: check-stage.ts <package-lock.json> <stage>');
const lock = JSON.parse(readFileSync(lockPath, 'utf8')) as { packages: Record<string, { name?: string; version?: string }> };
const problems: string[] = [];
const installed = installedPackages(stage);
for (const { location, name, version } of installed) {
  const locked = lock.packages[location];
  if (!locked) problems.push(`${location} (${name}@${version}) is not in the lockfile`);
  else if (locked.version !== version) problems.push(`${location} is ${version}, the lockfile pins ${String(locked.version)}`);
  else if (!location.endsWith(`node_modules/${name}`) && locked.name !== name)
    problems.push(`${location} is ${name}, the lockfile says ${String(locked.name)}`);
}
if (problems.length > 0) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(`image: ${installed.length} npm packages staged, each at its lockfile location and version`);
