/**
 * Files `hermes-aip admission` reads. Evidence documents keep their number lexemes (`parseWire`), so that the
 * statement digests cover what the reference's `digest_json` computes over the same text. Errors name the option,
 * never the file's content or path.
 */
import { readFileSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { type Json, parseWire } from '../../host/wire/json.js';
import { parseJsonText } from '../../internal/json-text.js';
import { fileErrorText } from '../args.js';
import { UsageError } from '../errors.js';

/** The reference's default `max_evidence_document_bytes`: a larger document could never be admitted. */
export const MAX_DOCUMENT_BYTES = 8 * 1024 * 1024;
/** The reference's default `max_package_bytes`. */
export const MAX_PACKAGE_BYTES = 16 * 1024 * 1024;

/** A document as read: `tree` keeps number lexemes (what is embedded and digested), `value` is plain JSON (what is checked). */
export interface Document {
  readonly tree: unknown;
  readonly value: Json;
  /** The file's modification time (epoch ms). */
  readonly modifiedMs: number;
  /** The raw bytes, for digests of the file itself. */
  readonly bytes: Buffer;
}

export function readBytes(path: string, what: string, maxBytes = MAX_DOCUMENT_BYTES): { bytes: Buffer; modifiedMs: number } {
  try {
    const stat = statSync(path);
    if (!stat.isFile()) throw new UsageError(`${what}: not a regular file`);
    if (stat.size > maxBytes) throw new UsageError(`${what}: the file is larger than ${maxBytes} bytes`);
    return { bytes: readFileSync(path), modifiedMs: stat.mtimeMs };
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(`${what}: cannot read the file: ${fileErrorText(error)}`);
  }
}

/** A JSON evidence document, strictly parsed as serde_json would accept it. */
export function readDocument(path: string, what: string): Document {
  const { bytes, modifiedMs } = readBytes(path, what);
  const parsed = parseWire(bytes.toString('utf8'));
  if ('error' in parsed) throw new UsageError(`${what}: not JSON: ${parsed.error}`);
  return { tree: parsed.tree, value: parsed.value, modifiedMs, bytes };
}

/** A small JSON settings file (coordinates, signers, policies) and the folder its relative paths are resolved against. */
export function readSettingsFile(path: string, what: string): { value: unknown; folder: string } {
  const { bytes } = readBytes(path, what, 1024 * 1024);
  const value = parseJsonText(bytes.toString('utf8'), (why) => new UsageError(`${what}: not JSON: ${why}`));
  return { value, folder: dirname(resolve(path)) };
}

export const isRecord = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

/** A field of a settings object, refused with its path when it is not what `check` accepts. */
export function settingsField<T>(object: Record<string, unknown>, key: string, where: string, check: (value: unknown) => value is T, expected: string): T {
  const value = object[key];
  if (!check(value)) throw new UsageError(`${where}.${key}: must be ${expected}`);
  return value;
}

export function settingsObject(value: unknown, where: string): Record<string, unknown> {
  if (!isRecord(value)) throw new UsageError(`${where}: must be a JSON object`);
  return value;
}

/** 1 to `max` bytes of printable text (the reference's `validate_identifier`). */
export const isLabel =
  (max = 256) =>
  (value: unknown): value is string =>
    typeof value === 'string' && value.trim() !== '' && Buffer.byteLength(value) <= max && !/\p{Cc}/u.test(value);

export const isCount = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0 && (value as number) <= 0xffff_ffff;
