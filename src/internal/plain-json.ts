import { types } from 'node:util';

/** Deeper nesting is refused: the copy and everything downstream of it recurse. */
export const MAX_JSON_DEPTH = 1000;
/** More values than this (array elements and object members, at every depth) are refused. */
export const MAX_JSON_VALUES = 1_000_000;

/** Why a value has no plain JSON copy: its serialization throws, or it exceeds the limits above. */
export class NotPlainJson extends Error {
  readonly reason: 'not_json' | 'too_deep' | 'too_large';

  constructor(reason: NotPlainJson['reason']) {
    super(`not plain JSON data (${reason})`);
    this.name = 'NotPlainJson';
    this.reason = reason;
  }
}

/**
 * `JSON.parse(JSON.stringify(value) ?? 'null')` computed directly, without the string in
 * between: the same result (toJSON, boxed primitives, -0, non-finite numbers, undefined and
 * functions, sparse arrays, own `__proto__` keys, key order) and every property read once, as
 * JSON.stringify reads it. Throws NotPlainJson where JSON.stringify throws (cycles, BigInt, a
 * throwing getter or toJSON) and past MAX_JSON_DEPTH / MAX_JSON_VALUES, which JSON.stringify
 * would only reach by exhausting the stack or the heap. For an action's few small objects it is
 * several times cheaper than the round trip.
 */
export function plainJsonCopy(value: unknown): unknown {
  const walk = new CopyWalk();
  try {
    return walk.copy(value, '') ?? null;
  } catch (error) {
    throw error instanceof NotPlainJson ? error : new NotPlainJson('not_json');
  }
}

class CopyWalk {
  /** The objects being copied, outermost first: a repeat is a cycle. */
  readonly #path: object[] = [];
  #budget = MAX_JSON_VALUES;

  /** The JSON form of `holder[key]`; undefined where JSON.stringify writes nothing. */
  copy(value: unknown, key: string): unknown {
    if ((typeof value === 'object' && value !== null) || typeof value === 'function' || typeof value === 'bigint') {
      const toJSON = (value as { toJSON?: unknown }).toJSON;
      if (typeof toJSON === 'function') value = toJSON.call(value, key);
    }
    if (typeof value === 'object' && value !== null && types.isBoxedPrimitive(value)) value = unbox(value);
    switch (typeof value) {
      case 'string':
      case 'boolean':
        return value;
      case 'number':
        // JSON writes -0 as 0 and NaN and the infinities as null.
        return Number.isFinite(value) ? value + 0 : null;
      case 'bigint':
        throw new NotPlainJson('not_json');
      case 'object':
        return value === null ? null : this.#copyObject(value);
      default:
        return undefined; // undefined, functions, symbols
    }
  }

  #copyObject(value: object): unknown {
    if (this.#path.includes(value)) throw new NotPlainJson('not_json');
    if (this.#path.length === MAX_JSON_DEPTH) throw new NotPlainJson('too_deep');
    this.#path.push(value);
    const copy = Array.isArray(value) ? this.#copyArray(value) : this.#copyMembers(value as Record<string, unknown>);
    this.#path.pop();
    return copy;
  }

  #copyArray(array: unknown[]): unknown[] {
    const length = toLength(array.length);
    this.#spend(length);
    const copy = new Array<unknown>(length);
    for (let index = 0; index < length; index++) copy[index] = this.copy(array[index], String(index)) ?? null;
    return copy;
  }

  #copyMembers(object: Record<string, unknown>): Record<string, unknown> {
    const keys = Object.keys(object);
    this.#spend(keys.length);
    const copy: Record<string, unknown> = {};
    for (const key of keys) {
      const member = this.copy(object[key], key);
      if (member === undefined) continue;
      // JSON.parse defines an own "__proto__" member; assigning would set the prototype instead.
      if (key === '__proto__') Object.defineProperty(copy, key, { value: member, writable: true, enumerable: true, configurable: true });
      else copy[key] = member;
    }
    return copy;
  }

  #spend(values: number): void {
    this.#budget -= values;
    if (this.#budget < 0) throw new NotPlainJson('too_large');
  }
}

/** What JSON.stringify serializes a Number, String, Boolean or BigInt object as (ToNumber/ToString may call user code, as there). */
function unbox(value: object): unknown {
  if (types.isNumberObject(value)) return +value;
  if (types.isStringObject(value)) return `${value as unknown as string}`;
  if (types.isBooleanObject(value)) return Boolean.prototype.valueOf.call(value);
  if (types.isBigIntObject(value)) return BigInt.prototype.valueOf.call(value);
  return value; // a Symbol object serializes as an ordinary object
}

/** The spec's ToLength(ToNumber(length)), as LengthOfArrayLike reads a (possibly proxied) array's length. */
function toLength(length: unknown): number {
  const number = Math.trunc(+(length as number));
  return Number.isNaN(number) || number <= 0 ? 0 : Math.min(number, Number.MAX_SAFE_INTEGER);
}
