/** Ed25519 keys named as `did:key` (multicodec 0xed01, base58btc), signatures as standard base64 with padding. */
import { createPrivateKey, createPublicKey, type KeyObject, sign, verify } from 'node:crypto';
import { inspect } from 'node:util';
import { decodeBase58btc, encodeBase58btc } from './base58.js';

export interface SigningKey {
  readonly did: string;
  /** Standard base64 (with padding) of the Ed25519 signature over `bytes` (a string is signed as its UTF-8). */
  sign(bytes: string | Uint8Array): string;
}

const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_ED25519_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const ED25519_MULTICODEC = Buffer.from([0xed, 0x01]);
const DID_KEY_PREFIX = 'did:key:z';

class Ed25519SigningKey implements SigningKey {
  readonly did: string;
  readonly #key: KeyObject;

  constructor(key: KeyObject) {
    this.#key = key;
    this.did = didFromPublicKey(createPublicKey(key).export({ format: 'der', type: 'spki' }).subarray(-32));
  }

  sign(bytes: string | Uint8Array): string {
    return sign(null, typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes, this.#key).toString('base64');
  }

  /** The private half, for `shareableKey` only. */
  static keyObjectOf(key: Ed25519SigningKey): KeyObject {
    return key.#key;
  }

  toJSON(): { did: string } {
    return { did: this.did };
  }

  [inspect.custom](): string {
    return `SigningKey { did: '${this.did}' }`;
  }
}

/** The signing key of a 32-byte Ed25519 seed; the private half never leaves the KeyObject (not serialised, not inspected). */
export function signingKeyFromSeed(seed: Uint8Array): SigningKey {
  if (seed.length !== 32) throw new RangeError('an Ed25519 seed is 32 bytes');
  const der = Buffer.concat([PKCS8_ED25519_PREFIX, seed]);
  try {
    return new Ed25519SigningKey(createPrivateKey({ key: der, format: 'der', type: 'pkcs8' }));
  } finally {
    der.fill(0);
  }
}

/**
 * The private KeyObject of a key made by this module, to hand to a worker thread (a KeyObject passed by `postMessage`
 * or `workerData` is cloned into the worker, never serialised); `signingKeyFromKeyObject` there makes the same key.
 */
export function shareableKey(key: SigningKey): KeyObject {
  if (!(key instanceof Ed25519SigningKey)) throw new TypeError('only a key made by signingKeyFromSeed can be shared');
  return Ed25519SigningKey.keyObjectOf(key);
}

/** The signing key of a shared Ed25519 private KeyObject. */
export function signingKeyFromKeyObject(key: KeyObject): SigningKey {
  if (key.type !== 'private' || key.asymmetricKeyType !== 'ed25519') throw new TypeError('not an Ed25519 private key');
  return new Ed25519SigningKey(key);
}

/** A seed file's content: 64 hex digits, ASCII whitespace around them ignored (the reference bootstrap's `trim_ascii`). */
export function parseSeedHex(text: string): Uint8Array | undefined {
  const trimmed = text.replace(/^[\t\n\f\r ]+|[\t\n\f\r ]+$/g, '');
  return /^[0-9a-fA-F]{64}$/.test(trimmed) ? new Uint8Array(Buffer.from(trimmed, 'hex')) : undefined;
}

function didFromPublicKey(raw: Uint8Array): string {
  return DID_KEY_PREFIX + encodeBase58btc(Buffer.concat([ED25519_MULTICODEC, raw]));
}

/** Public keys of DIDs seen, so that a verification does not rebuild a KeyObject each time; bounded, oldest evicted. */
const publicKeys = new Map<string, KeyObject | null>();
const MAX_CACHED_KEYS = 256;

function publicKeyOfDid(did: string): KeyObject | null {
  const cached = publicKeys.get(did);
  if (cached !== undefined) return cached;
  const key = decodePublicKey(did);
  if (publicKeys.size >= MAX_CACHED_KEYS) publicKeys.delete(publicKeys.keys().next().value as string);
  publicKeys.set(did, key);
  return key;
}

function decodePublicKey(did: string): KeyObject | null {
  if (!did.startsWith(DID_KEY_PREFIX) || did.length > 64) return null;
  const bytes = decodeBase58btc(did.slice(DID_KEY_PREFIX.length));
  if (bytes === undefined || bytes.length !== 34 || bytes[0] !== 0xed || bytes[1] !== 0x01) return null;
  try {
    return createPublicKey({ key: Buffer.concat([SPKI_ED25519_PREFIX, bytes.subarray(2)]), format: 'der', type: 'spki' });
  } catch {
    return null;
  }
}

/** Whether `did` is a `did:key` naming an Ed25519 public key. */
export function isDidKey(did: string): boolean {
  return typeof did === 'string' && publicKeyOfDid(did) !== null;
}

const SIGNATURE_B64 = /^[A-Za-z0-9+/]{86}==$/;

/**
 * Whether `signatureB64` (canonical standard base64 of 64 bytes) is the Ed25519 signature by `did` over `bytes`; false on
 * any malformed input. `bytes` may be a function: it is called only once the signature and the DID are well-formed (a
 * canonical form costs as much as the parse of what it covers).
 */
export function verifyWithDid(did: string, bytes: string | Uint8Array | (() => string | Uint8Array), signatureB64: string): boolean {
  if (typeof did !== 'string' || typeof signatureB64 !== 'string' || !SIGNATURE_B64.test(signatureB64)) return false;
  const signature = Buffer.from(signatureB64, 'base64');
  // Non-zero unused bits in the last character decode the same bytes; the reference's base64 engine refuses them.
  if (signature.toString('base64') !== signatureB64) return false;
  const key = publicKeyOfDid(did);
  if (key === null) return false;
  const message = typeof bytes === 'function' ? bytes() : bytes;
  try {
    return verify(null, typeof message === 'string' ? Buffer.from(message, 'utf8') : message, key, signature);
  } catch {
    return false;
  }
}
