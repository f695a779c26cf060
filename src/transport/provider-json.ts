import { redactText } from '../internal/secret.js';

/**
 * Provider JSON nested deeper than this is refused: a result holding it could not be serialised
 * or stored (JSON.stringify recurses), and Hermes' own objects are a few levels deep.
 */
export const MAX_PROVIDER_JSON_DEPTH = 256;

/** Why provider JSON text was refused. */
export class ProviderJsonRefused extends Error {
  readonly reason: 'not_json' | 'too_deep';

  constructor(reason: ProviderJsonRefused['reason']) {
    super(`provider JSON refused (${reason})`);
    this.name = 'ProviderJsonRefused';
    this.reason = reason;
  }
}

/**
 * The value of JSON text from the provider, with the endpoint's key (`secret`) replaced wherever it
 * appears in a string or a member name, since a broken or hostile server may reflect its
 * Authorization header. Throws ProviderJsonRefused when the text is not JSON or is nested more
 * than MAX_PROVIDER_JSON_DEPTH levels deep (checked before parsing, so such a body is never built).
 */
export function parseProviderJson(text: string, secret: string | undefined): unknown {
  if (nestedDeeperThan(text, MAX_PROVIDER_JSON_DEPTH)) throw new ProviderJsonRefused('too_deep');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ProviderJsonRefused('not_json');
  }
  return secret !== undefined && mayHold(text, secret) ? redactIn(value, secret) : value;
}

/**
 * Whether parsing `text` can give a string holding `secret`: only if the text holds it as it is,
 * or holds a JSON escape that could spell one of its characters. Every character of a key is
 * visible ASCII (the configuration allows nothing else), so that is `\u0021`-`\u007e`, and `\"`,
 * `\\`, `\/` for a key holding one of those three. `\n` or `\u00e9`, common in model output,
 * cannot; nor can `\"` (quotes in model text) for a key without a quote. One search for the key,
 * then one indexOf per backslash (no regular expression over the whole text).
 */
export function mayHold(text: string, secret: string): boolean {
  if (text.includes(secret)) return true;
  const anyEscape = secret.includes('"') || secret.includes('\\') || secret.includes('/');
  for (let at = text.indexOf('\\'); at !== -1; at = text.indexOf('\\', at + 1)) {
    const next = text.charCodeAt(at + 1);
    if (anyEscape && (next === QUOTE || next === BACKSLASH || next === SLASH)) return true;
    if (
      next === LOWER_U &&
      text.charCodeAt(at + 2) === DIGIT_0 &&
      text.charCodeAt(at + 3) === DIGIT_0 &&
      isAsciiEscapeHigh(text.charCodeAt(at + 4)) &&
      isHexDigit(text.charCodeAt(at + 5))
    ) {
      return true;
    }
  }
  return false;
}

const SLASH = 0x2f;
const LOWER_U = 0x75;
const DIGIT_0 = 0x30;

/** `2`-`7`: the high digit of `\u0020`-`\u007f`. */
function isAsciiEscapeHigh(code: number): boolean {
  return code >= 0x32 && code <= 0x37;
}

function isHexDigit(code: number): boolean {
  return (code >= 0x30 && code <= 0x39) || (code >= 0x41 && code <= 0x46) || (code >= 0x61 && code <= 0x66);
}

/** Replaces the secret in every string and member name of a parsed value, in place (the value is a fresh parse). */
function redactIn(value: unknown, secret: string): unknown {
  if (typeof value === 'string') return redactText(value, secret);
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) value[index] = redactIn(value[index], secret);
    return value;
  }
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    const member = redactIn(record[key], secret);
    const redactedKey = redactText(key, secret);
    if (redactedKey === key && member === record[key]) continue;
    // A renamed member moves to the end. Defined, not assigned: an own "__proto__" member must stay a member.
    if (redactedKey !== key) delete record[key];
    Object.defineProperty(record, redactedKey, { value: member, writable: true, enumerable: true, configurable: true });
  }
  return record;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACKET = 0x5d;
const CLOSE_BRACE = 0x7d;

/** Whether JSON text opens more than `limit` arrays or objects inside one another. Strings are skipped with indexOf. */
export function nestedDeeperThan(text: string, limit: number): boolean {
  // Every level takes an opening and a closing bracket: short text cannot be that deep.
  if (text.length <= 2 * limit) return false;
  let depth = 0;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (code === QUOTE) index = closingQuote(text, index);
    else if (code === OPEN_BRACKET || code === OPEN_BRACE) {
      if (++depth > limit) return true;
    } else if (code === CLOSE_BRACKET || code === CLOSE_BRACE) depth--;
  }
  return false;
}

/** The index of the quote closing the string that opens at `open`; the text's end if it never closes. */
function closingQuote(text: string, open: number): number {
  let at = text.indexOf('"', open + 1);
  while (at !== -1 && isEscaped(text, at)) at = text.indexOf('"', at + 1);
  return at === -1 ? text.length : at;
}

function isEscaped(text: string, at: number): boolean {
  let backslashes = 0;
  while (text.charCodeAt(at - 1 - backslashes) === BACKSLASH) backslashes++;
  return backslashes % 2 === 1;
}
