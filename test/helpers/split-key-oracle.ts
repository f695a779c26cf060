/**
 * Streams for the tests of the split-key hold-back, and what their events must read once the
 * endpoint's key is redacted, computed the slow and obvious way: each event's strings with the key
 * replaced (the per-event redaction), then each run of consecutive `message.delta` events joined,
 * the key searched left to right in the joined text, and each key found replaced by `[REDACTED]`
 * in the delta where it began and removed from the others.
 */
import fc from 'fast-check';
import { splitAt } from './split.js';

const REDACTED = '[REDACTED]';

/**
 * A key of characters no other part of the tests' streams holds (`run_1`, the field and event
 * names, `[REDACTED]`), several repeating themselves (`hh`, `hkh`), where a key may begin inside another.
 */
export const splitKeyArb = fc.array(fc.constantFrom('h', 'k', 'Q', '7', 'Z', '_'), { minLength: 2, maxLength: 6 }).map((chars) => chars.join(''));

/** A text holding keys, pieces of the key and other characters. */
export function keyTextArb(key: string): fc.Arbitrary<string> {
  return fc
    .array(
      fc.oneof(
        fc.constant(key),
        fc.tuple(fc.nat(key.length), fc.nat(key.length)).map(([a, b]) => key.slice(Math.min(a, b), Math.max(a, b))),
        fc.string({ unit: fc.constantFrom('h', 'k', 'Q', '7', 'Z', '_', ' ', 'a', 'é'), maxLength: 4 }),
      ),
      { maxLength: 4 },
    )
    .map((pieces) => pieces.join(''));
}

/** The texts of consecutive deltas: such a text cut anywhere. */
export function keyDeltaTextsArb(key: string): fc.Arbitrary<string[]> {
  return fc
    .tuple(keyTextArb(key), fc.array(fc.nat(), { maxLength: 6 }))
    .map(([text, cuts]) => splitAt(Buffer.from(text, 'latin1'), cuts).map((piece) => Buffer.from(piece).toString('latin1')));
}

export interface OracleEvent {
  event: string;
  data: Record<string, unknown>;
  id?: string;
}

const isDelta = (item: unknown): item is OracleEvent & { data: { delta: string } } =>
  (item as OracleEvent).event === 'message.delta' && typeof (item as OracleEvent).data?.delta === 'string';

/** The items (events, and any other marker passed through as is) as they must leave, redacted. */
export function redactedItems<Item>(items: Item[], key: string): Item[] {
  const out = items.map((item) => (isEvent(item) ? (redactStrings(item, key) as Item) : item));
  for (let start = 0; start < out.length; ) {
    if (!isDelta(out[start])) {
      start++;
      continue;
    }
    let end = start;
    while (end < out.length && isDelta(out[end])) end++;
    redactRun(out.slice(start, end) as Array<OracleEvent & { data: { delta: string } }>, key);
    start = end;
  }
  return out;
}

/**
 * How many of `items` (all that a stream has given so far) may have left: all, unless the last
 * ones are deltas whose joined text (after its last key) ends with a proper prefix of the key;
 * then the deltas that overlap the longest such prefix stay held, with any empty delta after them.
 */
export function releasableCount(items: unknown[], key: string): number {
  let start = items.length;
  while (start > 0 && isDelta(items[start - 1])) start--;
  const deltas = (items.slice(start) as OracleEvent[]).map((item) => redactStrings(item, key).data.delta as string);
  const text = deltas.join('');
  const keys = keysIn(text, key);
  const after = keys.length === 0 ? 0 : (keys.at(-1) as number) + key.length;
  let prefixAt = -1;
  for (let at = Math.max(after, text.length - key.length + 1); at < text.length && prefixAt === -1; at++) {
    if (key.startsWith(text.slice(at))) prefixAt = at;
  }
  if (prefixAt === -1) return items.length;
  let released = start;
  let end = 0;
  for (const delta of deltas) {
    end += delta.length;
    if (end > prefixAt) break;
    released++;
  }
  return released;
}

function isEvent(item: unknown): item is OracleEvent {
  return typeof (item as OracleEvent).event === 'string' && typeof (item as OracleEvent).data === 'object';
}

function redactStrings<Value>(value: Value, key: string): Value {
  if (typeof value === 'string') return value.replaceAll(key, REDACTED) as Value;
  if (Array.isArray(value)) return value.map((element) => redactStrings(element, key)) as Value;
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([name, element]) => [redactStrings(name, key), redactStrings(element, key)])) as Value;
  }
  return value;
}

function keysIn(text: string, key: string): number[] {
  const keys: number[] = [];
  for (let at = text.indexOf(key); at !== -1; at = text.indexOf(key, at + key.length)) keys.push(at);
  return keys;
}

function redactRun(run: Array<OracleEvent & { data: { delta: string } }>, key: string): void {
  const text = run.map((event) => event.data.delta).join('');
  const keys = keysIn(text, key);
  let start = 0;
  for (const event of run) {
    const end = start + event.data.delta.length;
    let kept = '';
    for (let at = start; at < end; at++) {
      const inKey = keys.find((keyAt) => keyAt <= at && at < keyAt + key.length);
      if (inKey === undefined) kept += text[at];
      else if (inKey === at) kept += REDACTED;
    }
    event.data.delta = kept;
    start = end;
  }
}
