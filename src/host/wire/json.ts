import { OUT_OF_RANGE, readSerdeNumber, reserialiseSerdeNumber, type SerdeNumber, writeSerdeFloat } from './serde-number.js';

/**
 * JSON exactly as the reference runtime (Rust serde_json with `preserve_order`, no `arbitrary_precision`)
 * writes it: compact, its string escaping, its number formatting. Signatures on the AIP hop cover these bytes.
 */

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** A number as it appeared in parsed text, with what serde_json reads from it. */
export class NumberLexeme {
  constructor(
    readonly lexeme: string,
    readonly read: SerdeNumber,
  ) {}
}

/** Above this magnitude a double's shortest text may be out of serde_json's range (its parse can round past the largest double). */
const NEAR_F64_MAX = 1.79e308;

/**
 * The text we send for a JS number: integral numbers in the i64/u64 range as integers (exact digits), anything
 * else as serde_json writes an f64. Non-finite numbers, and the rare double next to the largest one that
 * serde_json's parse would take out of range, are null (serde_json writes a non-finite f64 as null).
 */
export function serdeNumber(n: number): string {
  // Below 2^53 String() writes the exact digits (and "0" for -0, as BigInt does); beyond it only BigInt does.
  if (Number.isSafeInteger(n)) return String(n);
  if (!Number.isFinite(n)) return 'null';
  if (Number.isInteger(n) && n >= -(2 ** 63) && n < 2 ** 64) return BigInt(n).toString();
  const text = writeSerdeFloat(n);
  return Math.abs(n) > NEAR_F64_MAX && readSerdeNumber(text) === OUT_OF_RANGE ? 'null' : text;
}

/**
 * What the reference verifies for a number we send as `text`: serde_json's re-serialisation of its parse of
 * exactly that text (a float of 16–17 significant digits can come back one double away).
 */
function signedNumber(text: string): string {
  const reserialised = reserialiseSerdeNumber(text);
  return reserialised === OUT_OF_RANGE ? 'null' : reserialised;
}

const writeRead = (read: SerdeNumber): string => ('integer' in read ? read.integer : writeSerdeFloat(read.float));

/** A character that needs an escape (`"`, `\\`, U+0000–U+001F) or a surrogate (checked for pairing): only then the slow path. */
const NEEDS_CARE = /["\\\uD800-\uDFFF]|[^\x20-\uFFFF]/;

/** serde_json's string escaping equals JSON.stringify's for well-formed strings: `"`, `\`, control characters, lowercase `\u00xx`. */
function serdeString(text: string): string {
  if (!NEEDS_CARE.test(text)) return `"${text}"`;
  if (!text.isWellFormed()) throw new TypeError('a string with a lone surrogate has no UTF-8 form');
  return JSON.stringify(text);
}

/** Order of object keys by Unicode code point, which is the UTF-8 byte order Rust's `String` sorts by. */
export function compareCodePoints(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // Only a surrogate (an astral code point) against a BMP unit at or above U+E000 orders differently from UTF-16.
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs !== ys) return xs ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

/** Sorts keys in place by code point: the built-in UTF-16 sort, which agrees unless a key holds a unit from U+D800 up. */
function sortByCodePoint(keys: string[]): void {
  for (const key of keys) {
    for (let i = 0; i < key.length; i++) {
      if (key.charCodeAt(i) >= 0xd800) {
        keys.sort(compareCodePoints);
        return;
      }
    }
  }
  keys.sort();
}

/** The serde text of short keys seen: keys are field names, the same from message to message. Bounded in count and length. */
const keyTexts = new Map<string, string>();
const MAX_KEY_TEXTS = 4096;
const MAX_CACHED_KEY_LENGTH = 64;

function keyText(key: string): string {
  let text = keyTexts.get(key);
  if (text === undefined) {
    text = serdeString(key);
    if (key.length <= MAX_CACHED_KEY_LENGTH && keyTexts.size < MAX_KEY_TEXTS) keyTexts.set(key, text);
  }
  return text;
}

function serialise(value: unknown, sorted: boolean): string | undefined {
  switch (typeof value) {
    case 'string':
      return serdeString(value);
    case 'number':
      // Integers read back as they are written; only a float can change in serde_json's parse.
      return sorted && !Number.isSafeInteger(value) ? signedNumber(serdeNumber(value)) : serdeNumber(value);
    case 'bigint':
      return value.toString();
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      if (value === null) return 'null';
      if (value instanceof NumberLexeme) return sorted ? writeRead(value.read) : value.lexeme;
      if (Array.isArray(value)) return serialiseArray(value, sorted);
      return serialiseObject(value as Record<string, unknown>, sorted);
    default:
      return undefined;
  }
}

// Members are joined rather than appended: a rope keeps a 32-byte node per append until it is flattened, which for a
// 4 MiB array of small values is over 100 MB more than the joined text (the host canonicalises bodies up to 4 MiB).
function serialiseArray(items: readonly unknown[], sorted: boolean): string {
  const parts = new Array<string>(items.length);
  for (let i = 0; i < items.length; i++) parts[i] = serialise(items[i], sorted) ?? 'null';
  return `[${parts.join(',')}]`;
}

/** Up to this many members an object's text is appended to (faster than a join; the ropes stay small), past it joined. */
const APPENDED_MEMBERS = 32;

function serialiseObject(object: Record<string, unknown>, sorted: boolean): string {
  const keys = Object.keys(object);
  if (sorted) sortByCodePoint(keys);
  const joined: string[] | undefined = keys.length > APPENDED_MEMBERS ? [] : undefined;
  let text = '';
  for (const key of keys) {
    const item = serialise(object[key], sorted);
    if (item === undefined) continue;
    const member = `${keyText(key)}:${item}`;
    if (joined !== undefined) joined.push(member);
    else text = text === '' ? member : `${text},${member}`;
  }
  return `{${joined === undefined ? text : joined.join(',')}}`;
}

/**
 * The canonical form signatures cover, which is what the reference re-serialises after parsing what we send
 * (`wireJson`): keys sorted by code point at every depth, compact, serde escaping, and every number as serde_json
 * writes what it read from its sent text (a number parsed from a peer's text: what serde_json read from it).
 * Undefined is skipped.
 */
export function canonicalJson(value: unknown): string {
  return serialise(value, true) ?? 'null';
}

/** What we send: compact, insertion order, serde escaping; numbers as `serdeNumber` writes them, a parsed lexeme as it was read. */
export function wireJson(value: unknown): string {
  return serialise(value, false) ?? 'null';
}

/** serde_json's default recursion limit: 128 levels of arrays/objects fail, 127 parse. */
const MAX_DEPTH = 127;

/** `tree`: the parsed value with numbers kept as `NumberLexeme` (what `reference-types` decodes). `canonical(omit, at)`: canonical JSON of the value at path `at` (default the root), without the `omit` paths (relative to it). */
export type ParsedWire = { value: Json; tree: unknown; canonical: (omit?: string[][], at?: string[]) => string };

class WireSyntaxError extends Error {}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
/** RFC 8259 forbids U+0000–U+001F raw inside a string (every UTF-16 unit below U+0020). */
const CONTROL_CHARACTER = /[^\x20-\uFFFF]/;

const isWhitespace = (code: number): boolean => code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09;

/**
 * A strict RFC 8259 parser that keeps number lexemes. Own code rather than a library: lossless-json gives the same
 * control but builds strings a character at a time (about 1 s for a 4 MiB body, the host's request limit); this one
 * finds string ends with indexOf and decodes escapes with JSON.parse, about 40 ms for the same body.
 */
class WireParser {
  private at = 0;

  constructor(private readonly text: string) {}

  parse(): unknown {
    const value = this.value(0);
    this.skipWhitespace();
    if (this.at !== this.text.length) this.fail('trailing characters');
    return value;
  }

  /** serde_json's wording: "… at line L column C", C counted from 1 (in UTF-16 units here, bytes there). */
  private fail(what: string, at = this.at): never {
    const lineStart = this.text.lastIndexOf('\n', at - 1) + 1;
    const line = (this.text.slice(0, lineStart).match(/\n/g)?.length ?? 0) + 1;
    throw new WireSyntaxError(`${what} at line ${line} column ${at - lineStart + 1}`);
  }

  private skipWhitespace(): void {
    while (isWhitespace(this.text.charCodeAt(this.at))) this.at++;
  }

  private value(depth: number): unknown {
    this.skipWhitespace();
    const char = this.text[this.at];
    if (char === '{' || char === '[') {
      if (depth >= MAX_DEPTH) throw new WireSyntaxError('recursion limit exceeded');
      return char === '{' ? this.object(depth + 1) : this.array(depth + 1);
    }
    if (char === '"') return this.string();
    for (const [literal, value] of LITERALS) {
      if (this.text.startsWith(literal, this.at)) {
        this.at += literal.length;
        return value;
      }
    }
    NUMBER.lastIndex = this.at;
    const number = NUMBER.exec(this.text);
    if (number === null) this.fail('expected a value');
    const read = readSerdeNumber(number[0]);
    // serde_json refuses it (pointing at its last character), so the reference cannot have signed it: never read it as null.
    if (read === OUT_OF_RANGE) this.fail(OUT_OF_RANGE, NUMBER.lastIndex - 1);
    this.at = NUMBER.lastIndex;
    return new NumberLexeme(number[0], read);
  }

  private string(): string {
    const start = this.at;
    let end = this.text.indexOf('"', start + 1);
    while (end !== -1 && this.precededByOddBackslashes(end)) end = this.text.indexOf('"', end + 1);
    if (end === -1) this.fail('unterminated string');
    const raw = this.text.slice(start, end + 1);
    if (CONTROL_CHARACTER.test(raw)) this.fail('control character in a string');
    this.at = end + 1;
    let decoded: string;
    try {
      decoded = raw.includes('\\') ? (JSON.parse(raw) as string) : raw.slice(1, -1);
    } catch {
      this.fail('invalid escape in a string');
    }
    if (!decoded.isWellFormed()) this.fail('lone surrogate in a string');
    return decoded;
  }

  private precededByOddBackslashes(index: number): boolean {
    let count = 0;
    while (this.text.charCodeAt(index - 1 - count) === 0x5c) count++;
    return count % 2 === 1;
  }

  private expect(char: string): void {
    this.skipWhitespace();
    if (this.text[this.at] !== char) this.fail(`expected ${JSON.stringify(char)}`);
    this.at++;
  }

  private closes(char: string): boolean {
    this.skipWhitespace();
    if (this.text[this.at] !== char) return false;
    this.at++;
    return true;
  }

  private array(depth: number): unknown[] {
    this.at++;
    const items: unknown[] = [];
    if (this.closes(']')) return items;
    do items.push(this.value(depth));
    while (this.closes(','));
    this.expect(']');
    return items;
  }

  private object(depth: number): Record<string, unknown> {
    this.at++;
    const object: Record<string, unknown> = {};
    if (this.closes('}')) return object;
    do {
      this.skipWhitespace();
      if (this.text[this.at] !== '"') this.fail('expected a key');
      const key = this.string();
      if (Object.hasOwn(object, key)) this.fail(`duplicate key ${JSON.stringify(key)}`);
      this.expect(':');
      setOwn(object, key, this.value(depth));
    } while (this.closes(','));
    this.expect('}');
    return object;
  }
}

const LITERALS: ReadonlyArray<readonly [string, unknown]> = [
  ['true', true],
  ['false', false],
  ['null', null],
];

/**
 * Parses JSON strictly, as serde_json would accept it into a `Value`: RFC 8259 grammar, no lone surrogate (escaped
 * or raw), nesting below serde's limit. A repeated key is refused (serde would keep the last one; two parsers
 * disagreeing on a signed message is the ambiguity we refuse). `canonical(omit)` is the canonical form with serde's
 * re-serialisation of each number lexeme, minus the `omit` paths (e.g. [['security','signature']]).
 */
export function parseWire(text: string): ParsedWire | { error: string } {
  let tree: unknown;
  try {
    tree = new WireParser(text).parse();
  } catch (error) {
    if (error instanceof WireSyntaxError) return { error: error.message };
    throw error;
  }
  return new ParsedText(tree);
}

/**
 * A tree with its plain JSON copy built on first use: the host's path decodes the tree and needs no plain copy of
 * a large body (it costs as much as the parse). A class, not an object literal with a getter, which V8 builds
 * through its runtime: about 1 µs each against 50 ns, and the host's path builds several per message.
 */
export class WithPlainCopy {
  #value: Json | undefined;
  constructor(readonly tree: unknown) {}

  get value(): Json {
    this.#value ??= plainJson(this.tree);
    return this.#value;
  }
}

class ParsedText extends WithPlainCopy {
  canonical(omit: string[][] = [], at: string[] = []): string {
    return canonicalJson(withoutPaths(nodeAt(this.tree, at), omit));
  }
}

/** A parsed tree with its number lexemes turned into JS numbers: the values serde_json read (an integer beyond 2^53 rounded). */
export function plainJson(node: unknown): Json {
  if (node instanceof NumberLexeme) return 'integer' in node.read ? Number(node.read.integer) : node.read.float;
  if (Array.isArray(node)) return node.map(plainJson);
  if (node === null || typeof node !== 'object') return node as Json;
  const object: { [k: string]: Json } = {};
  for (const [key, item] of Object.entries(node)) setOwn(object, key, plainJson(item));
  return object;
}

/** Sets a key as plain data, including "__proto__", which assignment would treat as the prototype. */
export function setOwn<T>(object: Record<string, T>, key: string, value: T): void {
  if (key === '__proto__') Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
  else object[key] = value;
}

function nodeAt(node: unknown, path: string[]): unknown {
  let current = node;
  for (const key of path) {
    const isRecord = current !== null && typeof current === 'object' && !Array.isArray(current) && !(current instanceof NumberLexeme);
    current = isRecord && Object.hasOwn(current as object, key) ? (current as Record<string, unknown>)[key] : undefined;
  }
  return current;
}

export function withoutPaths(node: unknown, paths: string[][]): unknown {
  if (paths.length === 0 || node === null || typeof node !== 'object' || Array.isArray(node) || node instanceof NumberLexeme) return node;
  const copy: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(node)) {
    if (paths.some((path) => path.length === 1 && path[0] === key)) continue;
    const deeper = paths.filter((path) => path.length > 1 && path[0] === key).map((path) => path.slice(1));
    setOwn(copy, key, withoutPaths(item, deeper));
  }
  return copy;
}
