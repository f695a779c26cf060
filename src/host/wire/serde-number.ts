/**
 * Numbers exactly as the reference reads and writes them: serde_json 1.0.150 at its default features (no
 * `float_roundtrip`, no `arbitrary_precision`), which parses a float in two roundings and writes it in the
 * shortest round-trip form. Own code because no library emulates this parse: every signature on the AIP hop
 * covers the reference's re-serialisation, and about one Python timestamp in five comes back changed
 * (`1796300632.7149935` → `1796300632.7149937`). Held line by line to serde_json's own answers for 40,025
 * numbers (test/host/wire/serde-number.test.ts).
 */

/** A number as serde_json holds it: an integer (u64, or i64 when negative) kept as its digits, or an f64. */
export type SerdeNumber = { integer: string } | { float: number };

/** serde_json refuses the number ("number out of range"): the reference answers such a body with a parse error. */
export const OUT_OF_RANGE = 'number out of range';

/** 10^0 … 10^308 as Rust's literals are, correctly rounded (`10 ** i` in V8 is not always). */
const POW10 = Array.from({ length: 309 }, (_, i) => Number(`1e${i}`));
/** u64::MAX / 10 and u64::MAX % 10: serde_json's test before it appends a digit to the significand. */
const U64_MAX_TENTH = '1844674407370955161';
const U64_MAX_LAST_DIGIT = 5;
/** 2^63: a negative integer whose magnitude is larger is an f64 in serde_json. */
const I64_MIN_MAGNITUDE = 9223372036854775808n;
const I32_MAX = 2147483647;
const I32_MIN = -2147483648;

/**
 * The significand's digits as serde_json accumulates them in a u64: leading zeros dropped, a digit refused once
 * appending it would pass u64::MAX (only possible at 19 digits).
 */
function fitsU64(significand: string, digit: number): boolean {
  if (significand.length < 19) return true;
  if (significand.length > 19) return false;
  return significand < U64_MAX_TENTH || (significand === U64_MAX_TENTH && digit <= U64_MAX_LAST_DIGIT);
}

const isDigit = (code: number): boolean => code >= 48 && code <= 57;

/**
 * Reads a JSON number lexeme (RFC 8259 grammar, already matched) as serde_json's `Deserializer::parse_number`
 * does: integer digits into a u64 until it would overflow (further integer digits only raise the exponent),
 * fraction digits likewise (further ones dropped), the exponent into an i32 (an overflowing positive exponent
 * of a non-zero significand is out of range, any other gives ±0), then `f64_from_parts`.
 */
export function readSerdeNumber(lexeme: string): SerdeNumber | typeof OUT_OF_RANGE {
  const positive = lexeme.charCodeAt(0) !== 45;
  let at = positive ? 0 : 1;
  let significand = '';
  let exponent = 0;
  let longInteger = false;
  for (; isDigit(lexeme.charCodeAt(at)); at++) {
    const digit = lexeme.charCodeAt(at) - 48;
    longInteger ||= !fitsU64(significand, digit);
    if (longInteger) exponent++;
    else if (significand !== '' || digit !== 0) significand += lexeme[at];
  }
  let isFloat = longInteger;
  if (lexeme[at] === '.') {
    isFloat = true;
    let overflowed = false;
    for (at++; isDigit(lexeme.charCodeAt(at)); at++) {
      const digit = lexeme.charCodeAt(at) - 48;
      if (overflowed || !fitsU64(significand, digit)) {
        overflowed = true;
        continue;
      }
      if (significand !== '' || digit !== 0) significand += lexeme[at];
      exponent--;
    }
  }
  if (lexeme[at] === 'e' || lexeme[at] === 'E') {
    isFloat = true;
    at++;
    const positiveExponent = lexeme[at] !== '-';
    if (lexeme[at] === '+' || lexeme[at] === '-') at++;
    let written = 0;
    for (; isDigit(lexeme.charCodeAt(at)); at++) {
      const digit = lexeme.charCodeAt(at) - 48;
      if (written > 214748364 || (written === 214748364 && digit > 7)) {
        if (significand !== '' && positiveExponent) return OUT_OF_RANGE;
        return { float: positive ? 0 : -0 };
      }
      written = written * 10 + digit;
    }
    exponent = Math.min(I32_MAX, Math.max(I32_MIN, positiveExponent ? exponent + written : exponent - written));
  }
  if (!isFloat) return integerOrFloat(positive, significand);
  const float = fromParts(significand, exponent);
  if (float === undefined) return OUT_OF_RANGE;
  return { float: positive ? float : -float };
}

/** A lexeme without fraction or exponent whose digits fit a u64: an integer, except -0 and below i64::MIN. */
function integerOrFloat(positive: boolean, significand: string): SerdeNumber {
  if (positive) return { integer: significand === '' ? '0' : significand };
  if (significand === '' || BigInt(significand) > I64_MIN_MAGNITUDE) return { float: -Number(significand) };
  return { integer: `-${significand}` };
}

/**
 * serde_json's `f64_from_parts` without `float_roundtrip`: the u64 significand rounded to an f64 (Number() of
 * its digits rounds the same way, to nearest, ties to even), then one multiplication or division by a power of
 * ten from the table, both rounded again. Undefined where the product overflows.
 */
function fromParts(significand: string, exponent: number): number | undefined {
  let float = Number(significand);
  let power = exponent;
  for (;;) {
    const magnitude = Math.abs(power);
    if (magnitude < POW10.length) {
      if (power < 0) return float / (POW10[magnitude] as number);
      float *= POW10[magnitude] as number;
      return Number.isFinite(float) ? float : undefined;
    }
    if (float === 0) return float;
    if (power >= 0) return undefined;
    float /= 1e308;
    power += 308;
  }
}

/**
 * An f64 as serde_json writes it: the shortest round-trip digits d (length L) with decimal point position kk
 * (value = 0.d × 10^kk), then
 *   0 ≤ kk−L and kk ≤ 16  → digits, zero padding, ".0"        (1e15 → "1000000000000000.0")
 *   0 < kk ≤ 16           → digits with the point inside        ("12.34")
 *   −5 < kk ≤ 0           → "0." + (−kk zeros) + digits         ("0.0001234")
 *   otherwise             → "d" or "d.ddd", "e", signed kk−1    ("1e+16", "1.5e-7")
 * Zero is "0.0" (negative zero "-0.0"). Non-finite numbers are written as null, as serde_json writes them.
 */
export function writeSerdeFloat(n: number): string {
  if (!Number.isFinite(n)) return 'null';
  if (n === 0) return Object.is(n, -0) ? '-0.0' : '0.0';
  const sign = n < 0 ? '-' : '';
  const { digits, kk } = shortestDigits(Math.abs(n));
  const length = digits.length;
  if (kk - length >= 0 && kk <= 16) return `${sign}${digits}${'0'.repeat(kk - length)}.0`;
  if (kk > 0 && kk <= 16) return `${sign}${digits.slice(0, kk)}.${digits.slice(kk)}`;
  if (kk > -5 && kk <= 0) return `${sign}0.${'0'.repeat(-kk)}${digits}`;
  const fraction = length === 1 ? '' : `.${digits.slice(1)}`;
  const power = kk - 1;
  return `${sign}${digits[0]}${fraction}e${power >= 0 ? '+' : ''}${power}`;
}

const LEADING_ZEROS = /^0*/;
const TRAILING_ZEROS = /0*$/;

/**
 * The shortest round-trip digits of a positive finite double and the position of its decimal point, read from
 * `String(n)`: the digits `toExponential()` gives (V8 writes both in its shortest mode), at a seventh of its cost.
 * `String` writes "d[.ddd]e±x" from 1e21 up and below 1e-6, plain decimals in between ("0.00012", "1500").
 */
function shortestDigits(n: number): { digits: string; kk: number } {
  const text = String(n);
  const e = text.indexOf('e');
  if (e !== -1) return { digits: text.slice(0, e).replace('.', ''), kk: Number(text.slice(e + 1)) + 1 };
  const point = text.indexOf('.');
  if (point === -1) return { digits: text.replace(TRAILING_ZEROS, ''), kk: text.length };
  if (point !== 1 || text[0] !== '0') return { digits: `${text.slice(0, point)}${text.slice(point + 1)}`, kk: point };
  const fraction = text.slice(2);
  const zeros = (LEADING_ZEROS.exec(fraction) as RegExpExecArray)[0].length;
  return { digits: fraction.slice(zeros), kk: -zeros };
}

/** What serde_json writes for a number it parsed from `lexeme`: one parse, one write (never iterated: the parse is not idempotent). */
export function reserialiseSerdeNumber(lexeme: string): string | typeof OUT_OF_RANGE {
  if (readsAsCorrectlyRounded(lexeme)) return writeSerdeFloat(Number(lexeme));
  const read = readSerdeNumber(lexeme);
  if (read === OUT_OF_RANGE) return read;
  return 'integer' in read ? read.integer : writeSerdeFloat(read.float);
}

const PLAIN_DECIMAL = /^-?(\d+)\.(\d+)$/;
const EXACT_SIGNIFICAND_MAX = 2 ** 53;
/** 10^22 is the largest power of ten a double holds exactly. */
const EXACT_POWER_MAX = 22;

/**
 * Clinger's fast path, for a decimal without exponent: when its digits, as an integer, are at most 2^53 and it has
 * at most 22 fraction digits, both operands of `fromParts`'s one division are exact doubles, so serde_json's parse
 * rounds once, correctly, to the double `Number()` reads (no second rounding for it to differ by). Timestamps the
 * host writes, such as 1796032842.716812, take this path.
 */
function readsAsCorrectlyRounded(lexeme: string): boolean {
  const parts = PLAIN_DECIMAL.exec(lexeme);
  if (parts === null || (parts[2] as string).length > EXACT_POWER_MAX) return false;
  const significand = `${parts[1]}${parts[2]}`.replace(LEADING_ZEROS, '');
  return significand.length < 16 || (significand.length === 16 && Number(significand) <= EXACT_SIGNIFICAND_MAX);
}
