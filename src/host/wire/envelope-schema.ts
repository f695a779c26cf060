/**
 * The host's first two checks on a request body (`host_message`, aip-connector-host): the JSON Schema of `Envelope`
 * (aip-schema: schemars' schema of the Rust type, `aip_version` const "1.0", and `additionalProperties: false` added to
 * every typed object) → 400 `schema.envelope.invalid`; then the serde decode → 400 `envelope.decode.invalid`.
 * The schema sees only JSON types, required keys, enum strings, unknown keys and negative unsigned integers; what
 * only the decoder refuses is a timestamp that is not RFC 3339, an integer out of its Rust range or written as a
 * float (`1.0`), or a lone surrogate.
 */
import { NumberLexeme } from './json.js';
import { ENVELOPE, type Field, fieldNames, type Kind, type Reserialized, reserialize } from './reference-types.js';

const isRecord = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value) && !(value instanceof NumberLexeme);

const at = (path: string, key: string | number): string => (typeof key === 'number' ? `${path}[${key}]` : path === '' ? key : `${path}.${key}`);

/** JSON Schema's "integer": any number with a zero fractional part (1.0 included). */
function integerValue(value: unknown): number | undefined {
  const n = value instanceof NumberLexeme ? Number(value.lexeme) : typeof value === 'number' ? value : undefined;
  return n !== undefined && Number.isInteger(n) ? n : undefined;
}

function structProblem(fields: readonly Field[], value: unknown, path: string, closed: boolean): string | undefined {
  if (!isRecord(value)) return `${path || 'body'}: is not an object`;
  const known = fieldNames(fields);
  if (closed) {
    const extra = Object.keys(value).find((key) => !known.has(key));
    if (extra !== undefined) return `${at(path, extra)}: additional property not allowed`;
  }
  for (const spec of fields) {
    const present = Object.hasOwn(value, spec.name);
    const item = value[spec.name];
    if (!present) {
      if (spec.presence === 'required') return `${at(path, spec.name)}: required property missing`;
      continue;
    }
    if (item === null && (spec.presence === 'option' || spec.presence === 'nullable')) continue;
    const problem = schemaProblem(spec.kind, item, at(path, spec.name));
    if (problem !== undefined) return problem;
  }
  return undefined;
}

function schemaProblem(kind: Kind, value: unknown, path: string): string | undefined {
  switch (kind.k) {
    case 'any':
      return undefined;
    case 'string':
    case 'rfc3339':
    case 'persistedTime':
      return typeof value === 'string' ? undefined : `${path}: is not a string`;
    case 'bool':
      return typeof value === 'boolean' ? undefined : `${path}: is not a boolean`;
    case 'int': {
      const n = integerValue(value);
      if (n === undefined) return `${path}: is not an integer`;
      return !kind.signed && n < 0 ? `${path}: is less than the minimum of 0` : undefined;
    }
    case 'enum':
      return typeof value === 'string' && kind.values.includes(value) ? undefined : `${path}: is not one of the allowed values`;
    case 'vec':
    case 'set':
    case 'timeArray': {
      if (!Array.isArray(value)) return `${path}: is not an array`;
      if (kind.k !== 'vec') return undefined;
      for (const [i, item] of value.entries()) {
        const problem = schemaProblem(kind.of, item, at(path, i));
        if (problem !== undefined) return problem;
      }
      return undefined;
    }
    case 'struct':
      return structProblem(kind.fields, value, path, kind.flatten !== true);
    case 'tagged': {
      const tag = isRecord(value) ? value[kind.tag] : undefined;
      const fields = typeof tag === 'string' && Object.hasOwn(kind.variants, tag) ? kind.variants[tag] : undefined;
      if (fields === undefined) return `${path}: matches no variant`;
      return structProblem(withTagField(kind.tag, fields), value, path, true);
    }
    case 'adjacent': {
      const tag = isRecord(value) ? value[kind.tag] : undefined;
      const variant = typeof tag === 'string' && Object.hasOwn(kind.variants, tag) ? kind.variants[tag] : undefined;
      if (variant === undefined) return `${path}: matches no variant`;
      const fields: Field[] = [
        { name: kind.tag, kind: { k: 'string' }, presence: 'required' },
        { name: kind.content, kind: variant, presence: 'required' },
      ];
      return structProblem(fields, value, path, true);
    }
    case 'external': {
      const keys = isRecord(value) ? Object.keys(value) : [];
      const name = keys[0];
      if (keys.length !== 1 || name === undefined || !Object.hasOwn(kind.variants, name)) return `${path}: matches no variant`;
      return schemaProblem(kind.variants[name] as Kind, (value as Record<string, unknown>)[name], at(path, name));
    }
    case 'lazy':
      return schemaProblem(kind.get(), value, path);
  }
}

const taggedFields = new WeakMap<readonly Field[], readonly Field[]>();

/** An internally tagged variant's fields with its tag first, built once per variant. */
function withTagField(tag: string, fields: readonly Field[]): readonly Field[] {
  let withTag = taggedFields.get(fields);
  if (withTag?.[0]?.name !== tag) {
    withTag = [{ name: tag, kind: { k: 'string' }, presence: 'required' }, ...fields];
    taggedFields.set(fields, withTag);
  }
  return withTag;
}

export type EnvelopeCheck =
  | { ok: true; envelope: Extract<Reserialized, { ok: true }> }
  | { ok: false; code: 'schema.envelope.invalid' | 'envelope.decode.invalid'; message: string };

/** Checks #1 and #2 on a parsed body (a parseWire `tree` or plain JSON): the schema first, then the decode. */
export function checkEnvelope(body: unknown): EnvelopeCheck {
  const problem = schemaProblem(ENVELOPE, body, '') ?? (isRecord(body) && body['aip_version'] !== '1.0' ? 'aip_version: must be "1.0"' : undefined);
  if (problem !== undefined) return { ok: false, code: 'schema.envelope.invalid', message: problem };
  const decoded = reserialize.envelope(body);
  if (!decoded.ok) return { ok: false, code: 'envelope.decode.invalid', message: decoded.reason };
  return { ok: true, envelope: decoded };
}
