import { inspect } from 'node:util';

export const REDACTED = '[REDACTED]';

/**
 * Holds a credential so that it cannot leak by accident: JSON, string conversion and
 * util.inspect all print a placeholder. Only `reveal()` gives the value: to the request headers
 * (the connector's Bearer, the bridge's x-api-key), to the revision hash, and to the redaction of
 * provider answers, which must know the key to remove it.
 */
export class Secret {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  reveal(): string {
    return this.#value;
  }

  toJSON(): string {
    return REDACTED;
  }

  toString(): string {
    return REDACTED;
  }

  [inspect.custom](): string {
    return `Secret(${REDACTED})`;
  }
}

/** `text` with every occurrence of `secret` replaced by the placeholder; the same string when it holds none. */
export function redactText(text: string, secret: string): string {
  return text.includes(secret) ? text.replaceAll(secret, REDACTED) : text;
}
