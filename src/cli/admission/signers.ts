/**
 * The signers file: for the package and each evidence family, an owner-only file holding a 32-byte Ed25519 seed (64 hex
 * digits) and the identity the statement names. Every role needs its own key, as the reference's default trust policy
 * (`require_distinct_signers`) does: a release key that could also sign the scanners' outcomes could self-assert them.
 */
import { resolve } from 'node:path';
import { HostSettingError, readOwnedFile } from '../../host/settings.js';
import { parseSeedHex, type SigningKey, signingKeyFromSeed } from '../../host/wire/keys.js';
import { UsageError } from '../errors.js';
import { SIGNER_ROLES, type SignerRole } from './families.js';
import { isLabel, readSettingsFile, settingsField, settingsObject } from './inputs.js';

export interface Signer {
  readonly key: SigningKey;
  /** `signer_identity`: who the key belongs to, as people and services name it. */
  readonly identity: string;
}

export type Signers = Readonly<Record<SignerRole, Signer>>;

const MAX_SEED_FILE_BYTES = 256;

export function loadSigners(path: string): Signers {
  const { value, folder } = readSettingsFile(path, '--signers');
  const file = settingsObject(value, '--signers');
  const signers = {} as Record<SignerRole, Signer>;
  for (const role of SIGNER_ROLES) {
    const entry = settingsObject(file[role], `--signers ${role}`);
    const where = `--signers ${role}`;
    const seedFile = settingsField(entry, 'seed_file', where, isLabel(4096), 'the path of an owner-only seed file');
    const identity = settingsField(entry, 'identity', where, isLabel(512), '1 to 512 bytes of printable text');
    signers[role] = { key: keyOf(resolve(folder, seedFile), `${where}.seed_file`), identity };
  }
  requireDistinct(signers);
  return signers;
}

/** One seed file's key; the seed is never echoed, and the file must be owner-only (chmod 600). */
export function keyOf(path: string, what: string): SigningKey {
  let text: string;
  try {
    text = readOwnedFile(what, path, MAX_SEED_FILE_BYTES, 'secret');
  } catch (error) {
    if (error instanceof HostSettingError) throw new UsageError(error.message);
    throw error;
  }
  const seed = parseSeedHex(text);
  if (seed === undefined) throw new UsageError(`${what}: the file must hold exactly 64 hexadecimal characters (a 32-byte Ed25519 seed)`);
  try {
    return signingKeyFromSeed(seed);
  } finally {
    seed.fill(0);
  }
}

function requireDistinct(signers: Record<SignerRole, Signer>): void {
  const roleOfDid = new Map<string, SignerRole>();
  for (const role of SIGNER_ROLES) {
    const { did } = signers[role].key;
    const other = roleOfDid.get(did);
    if (other !== undefined) throw new UsageError(`--signers: ${other} and ${role} use the same key; every role needs its own (distinct signers)`);
    roleOfDid.set(did, role);
  }
}
