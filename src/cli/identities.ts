import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, realpathSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { canonicalJson } from '../internal/canonical-json.js';
import { AIP_VERSION, HERMES_PINNED_REVISION, PACKAGE_NAME, PACKAGE_ROOT, PACKAGE_VERSION } from '../internal/package-info.js';

/** What a qualification records about the artifacts it ran: the seed's "identities to record". */
export interface ArtifactIdentities {
  aip_protocol_version: string;
  /** `sha256:` + hex of the canonical JSON of the array of contracts/*.json, parsed, in file-name order. */
  contracts_digest: string;
  hermes_pinned_revision: string;
  connector: { package: string; version: string; git_revision: string; git_dirty: boolean | null };
  host: { node_version: string; platform: string; arch: string };
}

export function artifactIdentities(): ArtifactIdentities {
  const git = gitRevision();
  return {
    aip_protocol_version: AIP_VERSION,
    contracts_digest: contractsDigest(),
    hermes_pinned_revision: HERMES_PINNED_REVISION,
    connector: { package: PACKAGE_NAME, version: PACKAGE_VERSION, git_revision: git.revision, git_dirty: git.dirty },
    host: { node_version: process.version, platform: process.platform, arch: process.arch },
  };
}

export function contractsDigest(root: string = PACKAGE_ROOT): string {
  const folder = join(root, 'contracts');
  const names = readdirSync(folder)
    .filter((name) => name.endsWith('.json'))
    .sort();
  const contracts = names.map((name) => JSON.parse(readFileSync(join(folder, name), 'utf8')) as unknown);
  return `sha256:${sha256(canonicalJson(contracts))}`;
}

export function sha256(text: string | Uint8Array): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * `git rev-parse HEAD` of the package's own checkout. An installed package (no .git of its own,
 * perhaps inside someone else's repository) is 'unknown', never the surrounding repository's HEAD.
 */
function gitRevision(): { revision: string; dirty: boolean | null } {
  const git = (...args: string[]) =>
    execFileSync('git', ['-C', PACKAGE_ROOT, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 5000 }).trim();
  try {
    if (realpathSync(resolve(git('rev-parse', '--show-toplevel'))) !== realpathSync(resolve(PACKAGE_ROOT))) return { revision: 'unknown', dirty: null };
    const revision = git('rev-parse', 'HEAD');
    if (!/^[0-9a-f]{40,64}$/.test(revision)) return { revision: 'unknown', dirty: null };
    return { revision, dirty: git('status', '--porcelain', '--untracked-files=no') !== '' };
  } catch {
    return { revision: 'unknown', dirty: null };
  }
}
