/**
 * A serializer that reproduces Python's `json.dumps(value)` with default
 * arguments: separators `", "` / `": "`, `ensure_ascii=True`, insertion key order.
 *
 * JavaScript has a single number type, so a value that Python would hold as a
 * `float` (timestamps, durations) must be wrapped in `PyFloat` to keep its `.0`.
 * Plain integral numbers print as Python ints.
 */

export class PyFloat {
  constructor(readonly value: number) {}
}

export function pyFloat(value: number): PyFloat {
  return new PyFloat(value);
}

export interface PyJsonOptions {
  /** Sort object keys (like `sort_keys=True`); used for canonical fingerprints. */
  sortKeys?: boolean;
}

export function pyJson(value: unknown, options: PyJsonOptions = {}): string {
  return encodeValue(value, options.sortKeys === true);
}

function encodeValue(value: unknown, sortKeys: boolean): string {
  if (value === null || value === undefined) return 'null';
  if (value instanceof PyFloat) return pyFloatRepr(value.value);
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      return Number.isInteger(value) ? pyIntRepr(value) : pyFloatRepr(value);
    case 'bigint':
      return value.toString();
    case 'string':
      return pyString(value);
    case 'object':
      return Array.isArray(value) ? encodeArray(value, sortKeys) : encodeObject(value as Record<string, unknown>, sortKeys);
    default:
      throw new TypeError(`Object of type ${typeof value} is not JSON serializable`);
  }
}

function encodeArray(items: unknown[], sortKeys: boolean): string {
  return `[${items.map((item) => encodeValue(item, sortKeys)).join(', ')}]`;
}

function encodeObject(object: Record<string, unknown>, sortKeys: boolean): string {
  const keys = Object.keys(object).filter((key) => object[key] !== undefined);
  if (sortKeys) keys.sort();
  const members = keys.map((key) => `${pyString(key)}: ${encodeValue(object[key], sortKeys)}`);
  return `{${members.join(', ')}}`;
}

const SHORT_ESCAPES: Record<string, string> = {
  '"': '\\"',
  '\\': '\\\\',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\b': '\\b',
  '\f': '\\f',
};

/** Python's ensure_ascii escaping: everything outside 0x20..0x7E becomes `\uXXXX` (per UTF-16 unit). */
export function pyString(text: string): string {
  let out = '"';
  for (let i = 0; i < text.length; i++) {
    const char = text.charAt(i);
    const short = SHORT_ESCAPES[char];
    if (short !== undefined) {
      out += short;
      continue;
    }
    const code = text.charCodeAt(i);
    out += code >= 0x20 && code <= 0x7e ? char : `\\u${code.toString(16).padStart(4, '0')}`;
  }
  return `${out}"`;
}

function pyIntRepr(value: number): string {
  if (Object.is(value, -0)) return '0';
  return Number.isSafeInteger(value) ? String(value) : BigInt(value).toString();
}

/** Python `float.__repr__`: shortest round-trip digits, exponent form when the decimal point is far away. */
export function pyFloatRepr(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return 'Infinity';
  if (value === -Infinity) return '-Infinity';
  const sign = value < 0 || Object.is(value, -0) ? '-' : '';
  const [mantissa = '0', exponentText = '0'] = Math.abs(value).toExponential().split('e');
  const digits = mantissa.replace('.', '');
  const exponent = Number(exponentText);
  const decimalPoint = exponent + 1;
  if (decimalPoint > 16 || decimalPoint < -3) {
    const fraction = digits.length > 1 ? `.${digits.slice(1)}` : '';
    const expSign = exponent < 0 ? '-' : '+';
    return `${sign}${digits.charAt(0)}${fraction}e${expSign}${String(Math.abs(exponent)).padStart(2, '0')}`;
  }
  if (decimalPoint <= 0) return `${sign}0.${'0'.repeat(-decimalPoint)}${digits}`;
  if (decimalPoint >= digits.length) return `${sign}${digits}${'0'.repeat(decimalPoint - digits.length)}.0`;
  return `${sign}${digits.slice(0, decimalPoint)}.${digits.slice(decimalPoint)}`;
}
