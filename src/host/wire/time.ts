/**
 * Timestamps as the reference's `time` crate (0.3) writes and reads them: RFC 3339 strings (`time::serde::rfc3339`)
 * and the default serde form of `OffsetDateTime`, a 9-integer array.
 */

const DAY_MS = 86_400_000;

/** UTC epoch ms of a calendar moment; Date.UTC would read years 0–99 as 1900–1999. */
function utcMs(year: number, monthIndex: number, day: number, hour = 0, minute = 0, second = 0): number {
  const date = new Date(0);
  date.setUTCFullYear(year, monthIndex, day);
  date.setUTCHours(hour, minute, second, 0);
  return date.getTime();
}

function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

function daysInMonth(year: number, monthIndex: number): number {
  return [31, isLeapYear(year) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][monthIndex] ?? 0;
}

/** The fraction of a second as the time crate writes it: nanoseconds without trailing zeros, nothing when zero. */
function fraction(nanoseconds: number): string {
  if (nanoseconds === 0) return '';
  return `.${String(nanoseconds).padStart(9, '0').replace(/0+$/, '')}`;
}

const pad = (value: number, width = 2): string => String(value).padStart(width, '0');

/** The parts of an RFC 3339 timestamp, as the time crate's `Rfc3339` parser reads it. */
interface Rfc3339Parts {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
  nanosecond: number;
  offsetMinutes: number;
}

// 'T'/'t' and 'Z'/'z' accepted, one or more fractional digits (digits past the ninth are ignored, as the time crate does).
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

function parseParts(text: string): Rfc3339Parts | undefined {
  const match = RFC3339.exec(text);
  if (match === null) return undefined;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const nanosecond = Number((match[7] ?? '').slice(0, 9).padEnd(9, '0'));
  const offsetHours = Number(match[10] ?? 0);
  const offsetMinuteField = Number(match[11] ?? 0);
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month - 1)) return undefined;
  if (hour > 23 || minute > 59 || second > 60 || offsetHours > 23 || offsetMinuteField > 59) return undefined;
  const offsetMinutes = (match[9] === '-' ? -1 : 1) * (offsetHours * 60 + offsetMinuteField);
  if (second < 60) return { year, month, day, hour, minute, second, nanosecond, offsetMinutes };
  // The time crate reads a leap second only at 23:59:60 UTC, as the last nanosecond of 23:59:59.
  const utcMinuteOfDay = (((hour * 60 + minute - offsetMinutes) % 1440) + 1440) % 1440;
  return utcMinuteOfDay === 1439 ? { year, month, day, hour, minute, second: 59, nanosecond: 999_999_999, offsetMinutes } : undefined;
}

function partsToMs(parts: Rfc3339Parts): number {
  const local = utcMs(parts.year, parts.month - 1, parts.day, parts.hour, parts.minute, parts.second);
  return local - parts.offsetMinutes * 60_000 + Math.floor(parts.nanosecond / 1_000_000);
}

/** Epoch ms of an RFC 3339 timestamp with any offset and up to nanosecond precision (sub-ms floored); undefined when invalid. */
export function parseRfc3339(text: string): number | undefined {
  const parts = parseParts(text);
  return parts === undefined ? undefined : partsToMs(parts);
}

/** The string the reference writes after reading `text`: fraction trimmed, offset kept (`Z` for zero), upper-case `T`/`Z`. */
export function normaliseRfc3339(text: string): string | undefined {
  const parts = parseParts(text);
  return parts === undefined ? undefined : formatParts(parts);
}

function formatParts({ year, month, day, hour, minute, second, nanosecond, offsetMinutes }: Rfc3339Parts): string {
  const magnitude = Math.abs(offsetMinutes);
  const offset = offsetMinutes === 0 ? 'Z' : `${offsetMinutes < 0 ? '-' : '+'}${pad(Math.floor(magnitude / 60))}:${pad(magnitude % 60)}`;
  return `${pad(year, 4)}-${pad(month)}-${pad(day)}T${pad(hour)}:${pad(minute)}:${pad(second)}${fraction(nanosecond)}${offset}`;
}

/** RFC 3339 in UTC as the reference re-serialises it: "2026-12-01T21:00:00.12Z" (no trailing fractional zero, no ".000"). */
export function rfc3339(ms: number): string {
  const text = Number.isInteger(ms) ? utcRfc3339(ms, 0) : undefined;
  if (text === undefined) throw new RangeError(`${ms} is not a whole millisecond in years 0–9999`);
  return text;
}

/** The same for an instant in whole microseconds since the epoch (a float seconds timestamp's precision). */
export function rfc3339Micros(micros: number): string {
  const ms = Math.floor(micros / 1000);
  const text = Number.isSafeInteger(micros) ? utcRfc3339(ms, (micros - ms * 1000) * 1000) : undefined;
  if (text === undefined) throw new RangeError(`${micros} is not a whole microsecond in years 0–9999`);
  return text;
}

/** The UTC form of epoch `ms` plus `nanoseconds` (< 1 ms); undefined outside years 0–9999. */
function utcRfc3339(ms: number, nanoseconds: number): string | undefined {
  const date = new Date(ms);
  const year = date.getUTCFullYear();
  if (!(year >= 0 && year <= 9999)) return undefined;
  return formatParts({
    year,
    month: date.getUTCMonth() + 1,
    day: date.getUTCDate(),
    hour: date.getUTCHours(),
    minute: date.getUTCMinutes(),
    second: date.getUTCSeconds(),
    nanosecond: date.getUTCMilliseconds() * 1_000_000 + nanoseconds,
    offsetMinutes: 0,
  });
}

/** `OffsetDateTime`'s default serde form in UTC: [year, day_of_year, hour, minute, second, nanosecond, 0, 0, 0]. */
export function timeArray(ms: number): number[] {
  if (!Number.isInteger(ms)) throw new RangeError(`${ms} is not a whole millisecond`);
  const date = new Date(ms);
  const year = date.getUTCFullYear();
  const dayOfYear = Math.floor((ms - utcMs(year, 0, 1)) / DAY_MS) + 1;
  const milliseconds = ((ms % 1000) + 1000) % 1000;
  return [year, dayOfYear, date.getUTCHours(), date.getUTCMinutes(), date.getUTCSeconds(), milliseconds * 1_000_000, 0, 0, 0];
}

/** The offset in seconds the time crate builds from (hours, minutes, seconds): smaller parts take the sign of the larger. */
function offsetSeconds(hours: number, minutes: number, seconds: number): number {
  const sign = hours !== 0 ? Math.sign(hours) : minutes !== 0 ? Math.sign(minutes) : 1;
  return sign * (Math.abs(hours) * 3600 + Math.abs(minutes) * 60 + Math.abs(seconds));
}

const TIME_ARRAY_RANGES: ReadonlyArray<readonly [number, number]> = [
  [-9999, 9999],
  [1, 366],
  [0, 23],
  [0, 59],
  [0, 59],
  [0, 999_999_999],
  [-25, 25],
  [-59, 59],
  [-59, 59],
];

interface TimeArrayParts {
  year: number;
  dayOfYear: number;
  hour: number;
  minute: number;
  second: number;
  nanosecond: number;
  offsetSeconds: number;
}

function parseTimeArray(value: unknown): TimeArrayParts | undefined {
  if (!Array.isArray(value) || value.length !== 9) return undefined;
  const inRange = value.every((item, i) => {
    const [low, high] = TIME_ARRAY_RANGES[i] as readonly [number, number];
    return Number.isInteger(item) && item >= low && item <= high;
  });
  if (!inRange) return undefined;
  const [year, dayOfYear, hour, minute, second, nanosecond, offsetH, offsetM, offsetS] = value as number[] as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (dayOfYear > (isLeapYear(year) ? 366 : 365)) return undefined;
  return { year, dayOfYear, hour, minute, second, nanosecond, offsetSeconds: offsetSeconds(offsetH, offsetM, offsetS) };
}

/** Epoch ms (sub-ms floored) of a 9-integer time array, or undefined where the time crate would refuse it. */
export function fromTimeArray(value: unknown): number | undefined {
  const parts = parseTimeArray(value);
  if (parts === undefined) return undefined;
  const local = utcMs(parts.year, 0, parts.dayOfYear, parts.hour, parts.minute, parts.second) + Math.floor(parts.nanosecond / 1_000_000);
  return local - parts.offsetSeconds * 1000;
}

/** The array the time crate writes back after reading `value` (its offset parts re-signed as `UtcOffset` stores them). */
export function normaliseTimeArray(value: unknown): number[] | undefined {
  const parts = parseTimeArray(value);
  if (parts === undefined) return undefined;
  const magnitude = Math.abs(parts.offsetSeconds);
  const sign = parts.offsetSeconds < 0 ? -1 : 1;
  const offset = [Math.floor(magnitude / 3600), Math.floor(magnitude / 60) % 60, magnitude % 60].map((part) => (part === 0 ? 0 : sign * part));
  return [parts.year, parts.dayOfYear, parts.hour, parts.minute, parts.second, parts.nanosecond, ...offset];
}

/** RFC 3339 of a time array (the reference writes legacy arrays back as strings in some records); undefined when it has no RFC 3339 form. */
export function timeArrayToRfc3339(value: unknown): string | undefined {
  const parts = parseTimeArray(value);
  if (parts === undefined || parts.year < 0 || parts.offsetSeconds % 60 !== 0) return undefined;
  const date = new Date(utcMs(parts.year, 0, parts.dayOfYear));
  return formatParts({
    year: parts.year,
    month: date.getUTCMonth() + 1,
    day: date.getUTCDate(),
    hour: parts.hour,
    minute: parts.minute,
    second: parts.second,
    nanosecond: parts.nanosecond,
    offsetMinutes: parts.offsetSeconds / 60,
  });
}
