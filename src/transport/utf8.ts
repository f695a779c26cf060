import { isUtf8 } from 'node:buffer';

/** Invalid UTF-8; `validText` is the text of the whole, valid code points of the chunk before the fault. */
export class InvalidUtf8 extends TypeError {
  readonly validText: string;

  constructor(validText: string) {
    super('invalid UTF-8');
    this.name = 'InvalidUtf8';
    this.validText = validText;
  }
}

/**
 * `new TextDecoder('utf-8', { fatal: true }).decode(bytes)` for a whole body: the text, without a
 * leading byte order mark; undefined when the bytes are not valid UTF-8. `isUtf8` + `Buffer#toString`
 * instead of the fatal decoder: a third of its cost on a 340-byte Hermes status body.
 */
export function decodeUtf8(bytes: Buffer): string | undefined {
  if (!isUtf8(bytes)) return undefined;
  const text = bytes.toString('utf8');
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

/**
 * Streaming, strict UTF-8 decoding: what `new TextDecoder('utf-8', { fatal: true })` does with
 * `{ stream: true }`, about six times faster on Node 20 (validation by `isUtf8`, decoding by
 * `Buffer#toString`). A code point split between chunks is held back until it completes; an
 * invalid sequence throws InvalidUtf8 as soon as its bytes arrive; a leading byte order mark is dropped.
 */
export class StrictUtf8Decoder {
  /** The start of a code point whose remaining bytes are still to come (at most 3 bytes). */
  #carry: Buffer | undefined;
  #started = false;

  /** The text of every complete code point so far; throws InvalidUtf8. */
  decode(chunk: Uint8Array): string {
    let bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (this.#carry) {
      bytes = Buffer.concat([this.#carry, bytes]);
      this.#carry = undefined;
    }
    const complete = completeLength(bytes);
    if (complete < bytes.length) {
      const tail = bytes.subarray(complete);
      if (!canStartCodePoint(tail)) throw new InvalidUtf8(this.#text(bytes, validPrefixLength(bytes)));
      this.#carry = Buffer.from(tail);
    }
    if (!isUtf8(bytes.subarray(0, complete))) throw new InvalidUtf8(this.#text(bytes, validPrefixLength(bytes)));
    return this.#text(bytes, complete);
  }

  #text(bytes: Buffer, end: number): string {
    let text = bytes.toString('utf8', 0, end);
    if (!this.#started && text !== '') {
      this.#started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    return text;
  }
}

/**
 * The length of the longest prefix made of whole, valid code points (only after a fault). Cut
 * back to a code point boundary, a prefix stays valid as it shortens, so a binary search finds it.
 */
function validPrefixLength(bytes: Buffer): number {
  const validUpTo = (length: number) => isUtf8(bytes.subarray(0, completeLength(bytes.subarray(0, length))));
  let low = 0;
  let high = bytes.length;
  while (low < high) {
    const middle = Math.ceil((low + high) / 2);
    if (validUpTo(middle)) low = middle;
    else high = middle - 1;
  }
  return completeLength(bytes.subarray(0, low));
}

/** The length up to where a trailing, unfinished multi-byte sequence begins (all of it when none). */
function completeLength(bytes: Buffer): number {
  const length = bytes.length;
  for (let index = length - 1; index >= 0 && index >= length - 3; index--) {
    const byte = bytes[index] as number;
    if ((byte & 0xc0) === 0x80) continue; // a continuation byte: look further back for its lead
    return index + sequenceLength(byte) > length ? index : length;
  }
  return length;
}

/** How many bytes a sequence with this lead byte takes (invalid leads are caught by validation). */
function sequenceLength(lead: number): number {
  return lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
}

/**
 * Whether `head` (a lead byte and fewer continuation bytes than it needs) can still become a
 * valid code point: completed with the smallest continuation bytes its lead allows, is it valid?
 */
function canStartCodePoint(head: Buffer): boolean {
  const lead = head[0] as number;
  const whole = Buffer.alloc(sequenceLength(lead), 0x80);
  head.copy(whole);
  // E0 and F0 need a second byte of at least A0 and 90 (anything lower would be overlong).
  if (head.length === 1 && whole.length > 1) whole[1] = lead === 0xe0 ? 0xa0 : lead === 0xf0 ? 0x90 : 0x80;
  return isUtf8(whole);
}
