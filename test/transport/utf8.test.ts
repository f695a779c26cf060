import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { StrictUtf8Decoder, decodeUtf8 } from '../../src/transport/utf8.js';
import { caught } from '../helpers/fixtures.js';
import { splitAt } from '../helpers/split.js';

const SEED = 20261130;

/** Per chunk: the text decoded, or 'throws' (and nothing is fed after a throw). */
function outcomes(decode: (chunk: Uint8Array) => string, chunks: Uint8Array[]): string[] {
  const seen: string[] = [];
  for (const chunk of chunks) {
    try {
      seen.push(decode(chunk));
    } catch (error) {
      expect(error).toBeInstanceOf(TypeError);
      seen.push('throws');
      break;
    }
  }
  return seen;
}

function reference(chunks: Uint8Array[]): string[] {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  return outcomes((chunk) => decoder.decode(chunk, { stream: true }), chunks);
}

function ours(chunks: Uint8Array[]): string[] {
  const decoder = new StrictUtf8Decoder();
  return outcomes((chunk) => decoder.decode(chunk), chunks);
}

/** Mostly valid UTF-8 (every plane, a BOM now and then) with, sometimes, bytes that break it. */
const streams = fc
  .tuple(
    fc.string({ unit: 'binary', maxLength: 40 }),
    fc.boolean(),
    fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 3 }),
    fc.array(fc.nat(), { maxLength: 12 }),
  )
  .map(([text, bom, corruptions, cuts]) => {
    const bytes = Buffer.from(`${bom ? '\ufeff' : ''}${text}`, 'utf8');
    for (const [at, byte] of corruptions) if (bytes.length > 0) bytes[at % bytes.length] = byte;
    return splitAt(bytes, cuts);
  });

describe('StrictUtf8Decoder is TextDecoder("utf-8", { fatal: true }) in stream mode', () => {
  it('gives the same text per chunk and throws at the same chunk, for random byte streams split anywhere', () => {
    fc.assert(
      fc.property(streams, (chunks) => {
        expect(ours(chunks)).toEqual(reference(chunks));
      }),
      { seed: SEED, numRuns: 20_000 },
    );
  });

  it.each([
    ['a 4-byte code point one byte at a time', [[0xf0], [0x9f], [0x98], [0x80]]],
    [
      'a BOM split in two, then text',
      [
        [0xef, 0xbb],
        [0xbf, 0x68, 0x69],
      ],
    ],
    ['a BOM after the start is kept', [[0x68], [0xef, 0xbb, 0xbf]]],
    ['an overlong E0 80 prefix', [[0x61, 0xe0], [0x80], [0x80]]],
    ['a surrogate ED A0 prefix', [[0xed, 0xa0], [0x80]]],
    ['a lone continuation byte', [[0x80]]],
    ['C0, never a lead', [[0x61, 0xc0]]],
    ['F5, never a lead', [[0xf5]]],
    ['F4 90, past U+10FFFF', [[0xf4, 0x90]]],
    ['an unfinished code point, then ASCII', [[0xe2, 0x82], [0x41]]],
    ['empty chunks around a split code point', [[], [0xc3], [], [0xa9], []]],
  ])('%s', (_name, parts) => {
    const chunks = parts.map((part) => Uint8Array.from(part));
    expect(ours(chunks)).toEqual(reference(chunks));
  });
});

describe('the text before a fault', () => {
  const bytes = (...parts: Array<string | number[]>) => Buffer.concat(parts.map((part) => (typeof part === 'string' ? Buffer.from(part) : Buffer.from(part))));
  it.each([
    ['an invalid byte after text', [bytes('a é', [0xff], 'b')], 'a é'],
    ['an overlong encoding after a four-byte code point', [bytes('😀', [0xc0, 0xaf])], '😀'],
    ['a lead byte that cannot start a code point, at the end', [bytes('ok', [0xe0, 0x80])], 'ok'],
    ['a bad continuation of a lead byte carried from the last chunk', [bytes('x', [0xc3]), bytes([0x28], 'y')], ''],
    ['a byte order mark, text, then an invalid byte', [bytes([0xef, 0xbb, 0xbf], 'x', [0xff])], 'x'],
  ])('%s: InvalidUtf8 carries exactly the whole valid code points of the chunk before it', (_name, chunks, validText) => {
    const decoder = new StrictUtf8Decoder();
    const last = chunks.pop() as Buffer;
    for (const chunk of chunks) decoder.decode(chunk);
    expect(caught(() => decoder.decode(last))).toEqual(expect.objectContaining({ name: 'InvalidUtf8', validText }));
  });
});

describe('decodeUtf8 is TextDecoder("utf-8", { fatal: true }).decode for a whole body', () => {
  it('gives the same text, or undefined where the decoder throws, for random bytes', () => {
    const fatal = new TextDecoder('utf-8', { fatal: true });
    fc.assert(
      fc.property(streams, (chunks) => {
        const bytes = Buffer.concat(chunks);
        let expected: string | undefined;
        try {
          expected = fatal.decode(bytes);
        } catch {
          expected = undefined;
        }
        expect(decodeUtf8(bytes)).toBe(expected);
      }),
      { seed: SEED, numRuns: 20_000 },
    );
  });
});
