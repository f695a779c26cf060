import { REDACTED } from '../internal/secret.js';
import type { HermesSseEvent } from '../types.js';

/**
 * Keeps the endpoint's key from leaving a stream in pieces. A model that echoes the key streams it
 * token by token, so no single `message.delta` holds it and the per-event redaction cannot see it;
 * yet the deltas' texts, joined by the host, spell it. So a delta whose text ends with the start of
 * the key is held back until the deltas right after it either complete the key or stop matching
 * it. Then they leave together: a key completed across deltas becomes `[REDACTED]` in the delta
 * where it began and is removed from the others; deltas that never complete one leave untouched.
 * Any other item (a tool event, an approval request, the terminal event, `[DONE]`), a fault and
 * the end of the stream release what is held at once, ahead of it: only a run of consecutive
 * deltas is ever held, so no event the host must act on waits behind a delta. (A key split around
 * such an event is redacted in the joined `text` alone.)
 *
 * It works on a network read's items once they are decoded, so the per-frame path stays as it
 * was; a read none of whose deltas ends with a character some prefix of the key ends with (a
 * space, say) passes as it is, for one table lookup per delta.
 */
export class SplitKeyGuard {
  readonly #key: string;
  readonly #keyStart: string;
  /** The characters a proper prefix of the key can end with (a key is visible ASCII). */
  readonly #prefixEnds = new Uint8Array(128);
  #held: object[] = [];
  /** The joined text of the held deltas. */
  #heldText = '';

  constructor(key: string) {
    this.#key = key;
    this.#keyStart = key.charAt(0);
    for (let index = 0; index < key.length - 1; index++) this.#prefixEnds[key.charCodeAt(index) & 0x7f] = 1;
  }

  /**
   * The items of one read that may leave now, in order: `items` itself when none is held back.
   * `ended`: nothing follows them (a fault), so nothing stays held.
   */
  sift<Item extends object>(items: Item[], ended: boolean): Item[] {
    let index = 0;
    if (this.#held.length === 0) {
      while (index < items.length && !this.#startsKey(items[index] as Item)) index++;
      if (index === items.length) return items;
    }
    const out = items.slice(0, index);
    for (; index < items.length; index++) this.#take(items[index] as Item, out);
    if (ended) this.release(out);
    return out;
  }

  /** Whether the item is a delta whose text ends with the start of the key; its event name is compared last, as most texts fail the cheap test. */
  #startsKey(item: object): boolean {
    const delta = (item as Partial<HermesSseEvent>).data?.delta;
    return typeof delta === 'string' && this.#keyPrefixAt(delta, 0) !== -1 && (item as HermesSseEvent).event === 'message.delta';
  }

  #mayEndKeyPrefix(text: string): boolean {
    const last = text.charCodeAt(text.length - 1);
    return last < 128 && this.#prefixEnds[last] === 1;
  }

  #take(item: object, out: object[]): void {
    const delta = deltaOf(item);
    if (delta === undefined) {
      this.release(out);
      out.push(item);
      return;
    }
    if (this.#held.length === 0) {
      if (this.#keyPrefixAt(delta, 0) === -1) out.push(item);
      else {
        this.#held.push(item);
        this.#heldText = delta;
      }
      return;
    }
    this.#held.push(item);
    const text = this.#heldText + delta;
    this.#heldText = text;
    if (this.#keyPrefixAt(text, endOfLastKey(text, this.#key)) === -1) this.release(out);
  }

  /** Appends what is held to `out`, the keys completed across deltas redacted, and holds nothing more. */
  release(out: object[]): void {
    if (this.#held.length === 0) return;
    if (this.#heldText.includes(this.#key)) this.#redactAcross();
    for (const item of this.#held) out.push(item);
    this.#held = [];
    this.#heldText = '';
  }

  /**
   * Where in `text` (at or after `from`) a proper prefix of the key starts that runs to the
   * text's end: the longest one, or -1. Compared in place: no string is made per candidate.
   */
  #keyPrefixAt(text: string, from: number): number {
    if (!this.#mayEndKeyPrefix(text)) return -1; // the cheap test: one table lookup
    const key = this.#key;
    const length = text.length;
    for (let at = text.indexOf(this.#keyStart, Math.max(from, length - key.length + 1)); at !== -1; at = text.indexOf(this.#keyStart, at + 1)) {
      let matched = 1;
      while (at + matched < length && text.charCodeAt(at + matched) === key.charCodeAt(matched)) matched++;
      if (at + matched === length) return at;
    }
    return -1;
  }

  /** Rewrites the held deltas so that each key their joined text spells reads `[REDACTED]`, in the delta where it began. */
  #redactAcross(): void {
    const key = this.#key;
    const text = this.#heldText;
    const keys: number[] = [];
    for (let at = text.indexOf(key); at !== -1; at = text.indexOf(key, at + key.length)) keys.push(at);
    let offset = 0;
    for (const item of this.#held) {
      const delta = deltaOf(item);
      if (delta === undefined) continue;
      const start = offset;
      const end = offset + delta.length;
      offset = end;
      let kept = '';
      let position = start;
      for (const keyAt of keys) {
        const keyEnd = keyAt + key.length;
        if (keyEnd <= start || keyAt >= end) continue;
        if (keyAt > position) kept += text.slice(position, keyAt);
        if (keyAt >= start) kept += REDACTED;
        position = Math.min(keyEnd, end);
      }
      if (position === start) continue; // no key touches this delta
      kept += text.slice(position, end);
      (item as HermesSseEvent).data.delta = kept;
    }
  }
}

/** A `message.delta` event's text; undefined for any other item. */
function deltaOf(item: object): string | undefined {
  const event = item as Partial<HermesSseEvent>;
  const delta = event.event === 'message.delta' ? event.data?.delta : undefined;
  return typeof delta === 'string' ? delta : undefined;
}

/** Where the text after the last whole key starts (0 when it holds none): a new key can only begin there. */
function endOfLastKey(text: string, key: string): number {
  const last = text.lastIndexOf(key);
  return last === -1 ? 0 : last + key.length;
}
