import { randomBytes } from 'node:crypto';
import { format, inspect } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeBase58btc, encodeBase58btc } from '../../../src/host/wire/base58.js';
import { isDidKey, parseSeedHex, signingKeyFromSeed, verifyWithDid } from '../../../src/host/wire/keys.js';

const SEED = 20261202;
const seedArb = fc.uint8Array({ minLength: 32, maxLength: 32 });

describe('base58btc', () => {
  it('round-trips any bytes, leading zeros as leading 1s', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 40 }), (bytes) => {
        const text = encodeBase58btc(bytes);
        expect(text).toMatch(/^[1-9A-HJ-NP-Za-km-z]*$/);
        expect(decodeBase58btc(text)).toEqual(bytes);
      }),
      { seed: SEED, numRuns: 1000 },
    );
    expect(encodeBase58btc(Uint8Array.from([0, 0, 1]))).toBe('112');
    expect(decodeBase58btc('0OIl')).toBeUndefined();
  });
});

describe('signing keys', () => {
  it('sign → verify round-trips for any seed and message; another key or message fails', () => {
    fc.assert(
      fc.property(seedArb, seedArb, fc.uint8Array({ maxLength: 300 }), (seed, otherSeed, message) => {
        const key = signingKeyFromSeed(seed);
        const signature = key.sign(message);
        expect(signature).toMatch(/^[A-Za-z0-9+/]{86}==$/);
        expect(isDidKey(key.did)).toBe(true);
        expect(verifyWithDid(key.did, message, signature)).toBe(true);
        const other = signingKeyFromSeed(otherSeed);
        if (other.did !== key.did) expect(verifyWithDid(other.did, message, signature)).toBe(false);
      }),
      { seed: SEED, numRuns: 200 },
    );
  });

  it('a flipped byte anywhere in the message or the signature fails verification', () => {
    fc.assert(
      fc.property(seedArb, fc.string({ minLength: 1, maxLength: 200 }), fc.nat(), fc.integer({ min: 1, max: 255 }), (seed, text, at, mask) => {
        const key = signingKeyFromSeed(seed);
        const message = Buffer.from(text, 'utf8');
        const signature = Buffer.from(key.sign(message), 'base64');
        const flippedMessage = Buffer.from(message);
        flippedMessage[at % message.length]! ^= mask;
        expect(verifyWithDid(key.did, flippedMessage, signature.toString('base64'))).toBe(false);
        const flippedSignature = Buffer.from(signature);
        flippedSignature[at % signature.length]! ^= mask;
        expect(verifyWithDid(key.did, message, flippedSignature.toString('base64'))).toBe(false);
      }),
      { seed: SEED, numRuns: 300 },
    );
  });

  it('signs a string as its UTF-8 bytes', () => {
    const key = signingKeyFromSeed(new Uint8Array(32).fill(7));
    expect(key.sign('é{"a":1}')).toBe(key.sign(Buffer.from('é{"a":1}', 'utf8')));
    expect(verifyWithDid(key.did, 'é{"a":1}', key.sign('é{"a":1}'))).toBe(true);
  });

  it('verification is false, never a throw, on malformed input', () => {
    const key = signingKeyFromSeed(new Uint8Array(32).fill(9));
    const good = key.sign('m');
    const lastChar = good.at(-3)!;
    const sameBytesOtherText = `${good.slice(0, -3)}${String.fromCharCode(lastChar.charCodeAt(0) + 1)}==`;
    expect(Buffer.from(sameBytesOtherText, 'base64')).toEqual(Buffer.from(good, 'base64'));
    for (const [did, signature] of [
      [key.did, sameBytesOtherText],
      [key.did, good.replace(/==$/, '')],
      [key.did, `${good}=`],
      [key.did, good.replace(/\+/g, '-')],
      [key.did, ''],
      [key.did, 42],
      ['did:key:z6Mk', good],
      [`${key.did}x`, good],
      [key.did.replace('did:key:z', 'did:key:y'), good],
      ['did:web:example.com', good],
      [`did:key:z${encodeBase58btc(Buffer.concat([Buffer.from([0xed, 0x01]), Buffer.alloc(31)]))}`, good],
      [null, good],
    ] as Array<[string, string]>) {
      expect(verifyWithDid(did, 'm', signature)).toBe(false);
    }
    expect(isDidKey('did:key:z6MkmNL6xksdEJENGk9Z1qqGsY5njKQdjU1UhnUEUvWyQUVX')).toBe(true);
    expect(isDidKey(`did:key:z${encodeBase58btc(Buffer.concat([Buffer.from([0x12, 0x00]), randomBytes(32)]))}`)).toBe(false);
    expect(isDidKey('did:key:z0OIl')).toBe(false);
  });

  it('never shows the seed: JSON.stringify, util.inspect, format and string forms carry only the DID', () => {
    const seed = randomBytes(32);
    const key = signingKeyFromSeed(seed);
    const forms = [
      JSON.stringify(key),
      JSON.stringify({ nested: { key } }),
      inspect(key, { showHidden: true, depth: Number.POSITIVE_INFINITY, getters: true }),
      inspect({ key }, { showHidden: true, depth: Number.POSITIVE_INFINITY }),
      format('%o %O %j %s', key, key, key, key),
      String(key),
      Object.values(key).join(','),
    ];
    const secretForms = [seed.toString('hex'), seed.toString('base64'), seed.toString('base64url'), [...seed].join(',')];
    for (const form of forms) {
      for (const secret of secretForms) expect(form).not.toContain(secret);
    }
    expect(JSON.stringify(key)).toBe(JSON.stringify({ did: key.did }));
    expect(inspect(key)).toContain(key.did);
  });

  it('refuses a seed that is not 32 bytes', () => {
    expect(() => signingKeyFromSeed(new Uint8Array(31))).toThrow(RangeError);
    expect(() => signingKeyFromSeed(new Uint8Array(33))).toThrow(RangeError);
  });
});

describe('parseSeedHex', () => {
  it('reads 64 hex digits, ASCII whitespace around them ignored', () => {
    const hex = '1d'.repeat(32);
    expect(parseSeedHex(hex)).toEqual(new Uint8Array(32).fill(0x1d));
    expect(parseSeedHex(`${hex}\n`)).toEqual(new Uint8Array(32).fill(0x1d));
    expect(parseSeedHex(`${hex.toUpperCase()}\r\n`)).toEqual(new Uint8Array(32).fill(0x1d));
    expect(parseSeedHex(` \t${hex}\n\n`)).toEqual(new Uint8Array(32).fill(0x1d));
    for (const bad of [hex.slice(2), `${hex}00`, `${hex.slice(0, 32)} ${hex.slice(32)}`, `\u00a0${hex}`, `${hex.slice(2)}zz`, '']) {
      expect(parseSeedHex(bad)).toBeUndefined();
    }
  });
});
