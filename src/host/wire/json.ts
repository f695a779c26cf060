/**
 * JSON exactly as the reference runtime (Rust serde_json with `preserve_order`, no `arbitrary_precision`)
 * writes it: compact, its string escaping, its number formatting. Signatures on the AIP hop cover these bytes.
 */

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** A number as it appeared in parsed text; serialised the way serde_json re-serialises that lexeme. */
export class NumberLexeme {
  constructor(readonly lexeme: string) {}
}

const U64_MAX = (1n << 64n) - 1n;
const INTEGER_LEXEME = /^-?\d+$/;
const I64_MIN = -(1n << 63n);

/**
 * A JS number as serde_json writes it. Integral numbers in the i64/u64 range are integers on the Rust side
 * (exact digits); anything else is an f64, written by ryu (`serdeFloat`). Non-finite numbers serialise as null.
 */
export function serdeNumber(n: number): string {
  // Below 2^53 String() writes the exact digits (and "0" for -0, as BigInt does); beyond it only BigInt does.
  if (Number.isSafeInteger(n)) return String(n);
  if (!Number.isFinite(n)) return 'null';
  if (Number.isInteger(n) && n >= -(2 ** 63) && n < 2 ** 64) return BigInt(n).toString();
  return serdeFloat(n);
}

/**
 * An f64 in the format of ryu's `format64` (crate ryu, src/pretty/mod.rs), which serde_json uses: the shortest
 * round-trip digits d (length L) with decimal point position kk (value = 0.d × 10^kk), then
 *   0 ≤ kk−L and kk ≤ 16  → digits, zero padding, ".0"        (1e15 → "1000000000000000.0")
 *   0 < kk ≤ 16           → digits with the point inside        ("12.34")
 *   −5 < kk ≤ 0           → "0." + (−kk zeros) + digits         ("0.0001234")
 *   otherwise             → "d" or "d.ddd", "e", kk−1 (no "+")  ("1e16", "1.5e-7")
 * Zero is "0.0" (negative zero "-0.0"). JS `toExponential()` yields the same shortest digits.
 */
export function serdeFloat(n: number): string {
  if (!Number.isFinite(n)) return 'null';
  if (n === 0) return Object.is(n, -0) ? '-0.0' : '0.0';
  const sign = n < 0 ? '-' : '';
  const [mantissa = '', exponent = '0'] = Math.abs(n).toExponential().split('e');
  const digits = mantissa.replace('.', '');
  const length = digits.length;
  const kk = Number(exponent) + 1;
  if (kk - length >= 0 && kk <= 16) return `${sign}${digits}${'0'.repeat(kk - length)}.0`;
  if (kk > 0 && kk <= 16) return `${sign}${digits.slice(0, kk)}.${digits.slice(kk)}`;
  if (kk > -5 && kk <= 0) return `${sign}0.${'0'.repeat(-kk)}${digits}`;
  const fraction = length === 1 ? '' : `.${digits.slice(1)}`;
  return `${sign}${digits[0]}${fraction}e${kk - 1}`;
}

/**
 * How serde_json re-serialises a number lexeme it parsed into a `Value`: an integer lexeme that fits u64
 * (or i64 when negative, except "-0") stays as written; anything else becomes an f64 (`1e3` → `1000.0`, `-0` → `-0.0`).
 */
export function serdeLexeme(lexeme: string): string {
  if (INTEGER_LEXEME.test(lexeme) && lexeme !== '-0') {
    if (lexeme.length < 16) return lexeme;
    const value = BigInt(lexeme);
    if (value >= I64_MIN && value <= U64_MAX) return lexeme;
  }
  return serdeFloat(Number(lexeme));
}

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

/** Sorts keys by code point: the built-in UTF-16 sort, which agrees unless a key holds a unit from U+D800 up. */
function sortByCodePoint(keys: string[]): string[] {
  keys.sort();
  return keys.some((key) => BEYOND_SURROGATE_START.test(key)) ? keys.sort(compareCodePoints) : keys;
}
const BEYOND_SURROGATE_START = /[\uD800-\uFFFF]/;

function serialise(value: unknown, sorted: boolean): string | undefined {
  switch (typeof value) {
    case 'string':
      return serdeString(value);
    case 'number':
      return serdeNumber(value);
    case 'bigint':
      return value.toString();
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      if (value === null) return 'null';
      if (value instanceof NumberLexeme) return serdeLexeme(value.lexeme);
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

function serialiseObject(object: Record<string, unknown>, sorted: boolean): string {
  const keys = Object.keys(object);
  const parts: string[] = [];
  for (const key of sorted ? sortByCodePoint(keys) : keys) {
    const item = serialise(object[key], sorted);
    if (item !== undefined) parts.push(`${serdeString(key)}:${item}`);
  }
  return `{${parts.join(',')}}`;
}

/** The canonical form signatures cover: keys sorted by code point at every depth, compact, serde escaping and numbers; undefined skipped. */
export function canonicalJson(value: unknown): string {
  return serialise(value, true) ?? 'null';
}

/** What we send: compact, insertion order, serde escaping and numbers (a fixed point of a serde re-serialisation when the order is Rust's). */
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

  private fail(what: string): never {
    throw new WireSyntaxError(`${what} at position ${this.at}`);
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
    this.at = NUMBER.lastIndex;
    return new NumberLexeme(number[0]);
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
  let value: Json | undefined;
  return {
    // Built on first use: the host's path decodes the tree and needs no plain copy of a large body.
    get value() {
      value ??= plainJson(tree);
      return value;
    },
    tree,
    canonical: (omit = [], at = []) => canonicalJson(withoutPaths(nodeAt(tree, at), omit)),
  };
}

/** A parsed tree with its number lexemes turned into JS numbers. */
export function plainJson(node: unknown): Json {
  if (node instanceof NumberLexeme) return Number(node.lexeme);
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
