import { REDACTED } from '../internal/secret.js';
import type { HermesSseEvent } from '../types.js';

/**
 * Keeps the endpoint's key from leaving a stream in pieces. A model that echoes the key streams it
 * token by token, so no single `message.delta` holds it and the per-event redaction cannot see it;
 * yet the deltas' texts, joined by the host, spell it. So the guard holds back the deltas that
 * overlap the end of the deltas' joined text from where it could still become the key (its longest
 * end that is a proper prefix of the key, so shorter than the key), and releases every delta before
 * that at once. A key completed across deltas becomes `[REDACTED]` in the delta where it began and
 * is removed from the others; deltas that never complete one leave untouched. Each delta is
 * compared with what is held, never with the text released before it, so its cost does not grow
 * with the stream.
 *
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
  /** The deltas held back, in order: each overlaps #pending, or (empty) lies between two that do. */
  #held: object[] = [];
  /** The held deltas' text from where a key may still begin: a proper prefix of the key, '' when none is held. */
  #pending = '';
  /** Where #pending begins in the text of the first held delta. */
  #pendingFrom = 0;

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
    let out: object[];
    if (this.#held.length === 0) {
      while (index < items.length && !this.#startsKey(items[index] as Item)) index++;
      if (index === items.length) return items;
      out = items.slice(0, index);
      this.#extend(items[index] as Item, (items[index] as HermesSseEvent).data.delta as string, out);
      index++;
    } else out = [];
    for (; index < items.length; index++) this.#take(items[index] as Item, out);
    if (ended) this.release(out);
    return out as Item[];
  }

  /** Appends what is held to `out` (keys completed across deltas are redacted already) and holds nothing more. */
  release(out: object[]): void {
    for (const item of this.#held) out.push(item);
    this.#holdNothing();
  }

  #holdNothing(): void {
    this.#held = [];
    this.#pending = '';
    this.#pendingFrom = 0;
  }

  /** Whether the item is a delta whose text ends with the start of the key; its event name is compared last, as most texts fail the cheap test. */
  #startsKey(item: object): boolean {
    const delta = (item as Partial<HermesSseEvent>).data?.delta;
    return typeof delta === 'string' && this.#keyPrefixAt(delta, 0) !== -1 && (item as HermesSseEvent).event === 'message.delta';
  }

  #take(item: object, out: object[]): void {
    const delta = deltaOf(item);
    if (delta === undefined) {
      this.release(out);
      out.push(item);
    } else if (this.#held.length === 0 && this.#keyPrefixAt(delta, 0) === -1) out.push(item);
    else this.#extend(item, delta, out);
  }

  /**
   * Holds the delta after those held, redacts the keys their text now completes, and releases
   * the deltas that end before the text that may still become the key. Only `#pending` (shorter
   * than the key) and the delta are searched.
   */
  #extend(item: object, delta: string, out: object[]): void {
    this.#held.push(item);
    const window = this.#pending + delta;
    const keys = keysIn(window, this.#key);
    const keysEnd = keys.length === 0 ? 0 : (keys[keys.length - 1] as number) + this.#key.length;
    const pendingAt = this.#keyPrefixAt(window, keysEnd);
    const releaseBefore = pendingAt === -1 ? window.length : pendingAt;
    // Where each held delta's text lies in `window`: the first one's starts before it, at -#pendingFrom.
    let start = -this.#pendingFrom;
    let released = 0;
    for (const held of this.#held) {
      const text = deltaOf(held) as string;
      const end = start + text.length;
      const kept = keys.length === 0 ? text : withoutKeys(text, start, keys, this.#key.length);
      if (kept !== text) (held as HermesSseEvent).data.delta = kept;
      if (end > releaseBefore) {
        // The pending text is the end of this delta, which no key touched.
        this.#pendingFrom = kept.length - (end - releaseBefore);
        break;
      }
      released++;
      start = end;
    }
    for (let index = 0; index < released; index++) out.push(this.#held[index] as object);
    if (released === this.#held.length) this.#holdNothing();
    else {
      if (released > 0) this.#held = this.#held.slice(released);
      this.#pending = window.slice(releaseBefore);
    }
  }

  #mayEndKeyPrefix(text: string): boolean {
    const last = text.charCodeAt(text.length - 1);
    return last < 128 && this.#prefixEnds[last] === 1;
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
}

/** A `message.delta` event's text; undefined for any other item. */
function deltaOf(item: object): string | undefined {
  const event = item as Partial<HermesSseEvent>;
  const delta = event.event === 'message.delta' ? event.data?.delta : undefined;
  return typeof delta === 'string' ? delta : undefined;
}

/** Where the key occurs in `text`, left to right, each occurrence after the previous one's end. */
function keysIn(text: string, key: string): number[] {
  const keys: number[] = [];
  for (let at = text.indexOf(key); at !== -1; at = text.indexOf(key, at + key.length)) keys.push(at);
  return keys;
}

/**
 * A delta's text, lying at `start` of the text where `keys` were found, with each key that begins
 * in it replaced by `[REDACTED]` and the pieces of keys that began before it removed; `text`
 * itself when no key touches it.
 */
function withoutKeys(text: string, start: number, keys: number[], keyLength: number): string {
  let kept = '';
  let position = 0;
  for (const keyAt of keys) {
    const from = keyAt - start;
    const to = from + keyLength;
    if (to <= 0 || from >= text.length) continue;
    if (from > position) kept += text.slice(position, from);
    if (from >= 0) kept += REDACTED;
    position = Math.min(to, text.length);
  }
  return position === 0 ? text : kept + text.slice(position);
}
