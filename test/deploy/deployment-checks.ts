/**
 * What the deployment files (deploy/) are checked against: the variables `hermes-aip host` reads
 * (src/host/settings.ts), its settings loaded from them with stand-ins for the secret files, and the
 * health check run for real against a running host.
 */
import { randomBytes } from 'node:crypto';
import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { HOST_ENV_PREFIX, HOST_VARIABLES, type HostSettings, loadHostSettings } from '../../src/host/settings.js';
import { signingKeyFromSeed } from '../../src/host/wire/keys.js';
import { createPrivateCa } from '../helpers/private-ca.js';
import { hostFolder, ownerOnly } from '../host/host-env.js';

export const DEPLOY_ROOT = new URL('../../deploy/', import.meta.url).pathname;

const KNOWN_VARIABLES = new Set(HOST_VARIABLES.map((variable) => `${HOST_ENV_PREFIX}${variable.name}`));

/** The variables of `env` that `hermes-aip host` does not read. */
export function unknownHostVariables(env: Record<string, string>): string[] {
  return Object.keys(env).filter((name) => !KNOWN_VARIABLES.has(name));
}

/** The host variables that name a file (`…_FILE`), with the path each gives. */
export function fileVariables(env: Record<string, string>): Array<[string, string]> {
  return Object.entries(env).filter(([name]) => name.endsWith('_FILE'));
}

/** What a stand-in for each file variable holds: what the host expects to read there. */
function standIn(variable: string): string {
  const short = variable.slice(HOST_ENV_PREFIX.length);
  if (short === 'SIGNING_SEED_FILE') return `${randomBytes(32).toString('hex')}\n`;
  if (short === 'DATABASE_URL_FILE') return 'postgres://hermes_aip:stand-in@postgres:5432/hermes_aip_ledger\n';
  if (short === 'CONTROL_DID_FILE' || short === 'GATEWAY_DID_FILE') return `${signingKeyFromSeed(randomBytes(32)).did}\n`;
  if (short === 'TLS_CA_FILE') {
    const ca = createPrivateCa();
    ca.remove();
    return ca.caPem;
  }
  throw new Error(`no stand-in for ${variable}: add one when a deployment file uses it`);
}

/** The host's settings from `env`, every file variable pointed at an owner-only stand-in with what it must hold. */
export function settingsWithStandIns(env: Record<string, string>): HostSettings {
  const folder = hostFolder();
  const local = Object.fromEntries(fileVariables(env).map(([name]) => [name, ownerOnly(folder, name, standIn(name))]));
  return loadHostSettings({ ...env, ...local });
}

/** The seconds of a duration as Compose or Kubernetes writes it (`30s`, `1m30s`, or a number). */
export function seconds(duration: string | number): number {
  if (typeof duration === 'number') return duration;
  const match = /^(?:(\d+)m)?(?:(\d+)s)?$/.exec(duration);
  if (match === null || duration === '') throw new Error(`not a duration: ${duration}`);
  return Number(match[1] ?? 0) * 60 + Number(match[2] ?? 0);
}

/** Runs a health check's Node script with its address replaced by `base`; its exit code. */
export function runNodeProbe(script: string, from: string, base: string): number {
  if (!script.includes(from)) throw new Error(`the probe does not name ${from}`);
  return spawnSync(process.execPath, ['-e', script.replace(from, base)], { timeout: 30_000 }).status ?? -1;
}

/** Every file under deploy/ that git tracks, with its text. */
export function trackedDeployFiles(): Array<{ path: string; text: string }> {
  const tracked = new Set(
    execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', 'deploy'], { cwd: join(DEPLOY_ROOT, '..'), encoding: 'utf8' })
      .split('\n')
      .filter((line) => line !== ''),
  );
  return walk(DEPLOY_ROOT)
    .map((path) => relative(join(DEPLOY_ROOT, '..'), path))
    .filter((path) => tracked.has(path))
    .map((path) => ({ path, text: readFileSync(join(DEPLOY_ROOT, '..', path), 'utf8') }));
}

function walk(folder: string): string[] {
  return readdirSync(folder).flatMap((name) => {
    const path = join(folder, name);
    return statSync(path).isDirectory() ? walk(path) : [path];
  });
}

/** Text that would be a real secret in a file: a seed or key in hex, a PEM block, a URL with a password. */
export function secretLike(text: string): string[] {
  const patterns = [/\b[0-9a-f]{64}\b/i, /-----BEGIN [A-Z ]+-----/, /:\/\/[^/\s:%@]+:[^/\s@%]+@/, /did:key:z6Mk\w+/];
  return patterns.filter((pattern) => pattern.test(text)).map(String);
}
