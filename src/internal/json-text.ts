/**
 * JSON text a person gave (an argument, a file), and what is wrong with it when it is not JSON:
 * the position and the kind of error, never any of the text. V8's own message quotes an excerpt
 * (`Unexpected token 's', ..."run_id": sk_live_9f"...`), which could be a key pasted by mistake.
 */

/** Where JSON text goes wrong and how. */
export interface JsonSyntaxProblem {
  /** UTF-16 offset of the first character that makes the text not JSON. */
  offset: number;
  line: number;
  column: number;
  problem: string;
}

/**
 * The value of JSON text; when it is not JSON, throws what `refuse` makes of
 * `<kind of error> at line L, column C`.
 */
export function parseJsonText(text: string, refuse: (why: string) => Error): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    // The scanner follows RFC 8259 as JSON.parse does; should they ever disagree, still nothing of the text.
    const where = jsonSyntaxProblem(text) ?? { line: 1, column: 1, problem: 'not JSON' };
    throw refuse(`${where.problem} at line ${where.line}, column ${where.column}`);
  }
}

/** The first syntax error in `text`, or undefined when it is one JSON value (RFC 8259). */
export function jsonSyntaxProblem(text: string): JsonSyntaxProblem | undefined {
  const found = new JsonSyntaxScanner(text).firstError();
  return found && { ...found, ...lineAndColumn(text, found.offset) };
}

type Found = { offset: number; problem: string };
/** What may come next: a value, a property name, either or the container's end (right after it opened), or what follows a value. */
type Expecting = 'value' | 'value-or-close' | 'key' | 'key-or-close' | 'after-value';

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
/** A number followed by one of these is not a number JSON allows (`01`, `1.`, `1e`, `1-2`). */
const NUMBER_CONTINUATION = /[0-9.eE+-]/;
const HEX4 = /[0-9A-Fa-f]{4}/y;
const SIMPLE_ESCAPES = new Set(['"', '\\', '/', 'b', 'f', 'n', 'r', 't']);
const LITERALS = ['true', 'false', 'null'];

/** Iterative (a container stack, not recursion), so any nesting depth JSON.parse accepts is scanned too. */
class JsonSyntaxScanner {
  #at = 0;
  readonly #closers: string[] = [];

  constructor(private readonly text: string) {}

  firstError(): Found | undefined {
    let expecting: Expecting = 'value';
    for (;;) {
      this.#skipWhitespace();
      const next = this.#step(expecting);
      if (next === undefined || typeof next === 'object') return next;
      expecting = next;
    }
  }

  #step(expecting: Expecting): Expecting | Found | undefined {
    const char = this.text[this.#at];
    if (expecting === 'value-or-close' && char === ']') return this.#close();
    if (expecting === 'key-or-close' && char === '}') return this.#close();
    if (expecting === 'value' || expecting === 'value-or-close') return this.#value(char);
    if (expecting === 'key' || expecting === 'key-or-close') return this.#key(char);
    return this.#afterValue(char);
  }

  #value(char: string | undefined): Expecting | Found {
    if (char === '{' || char === '[') {
      this.#at++;
      this.#closers.push(char === '{' ? '}' : ']');
      return char === '{' ? 'key-or-close' : 'value-or-close';
    }
    if (char === '"') return this.#string() ?? 'after-value';
    if (char === '-' || (char !== undefined && char >= '0' && char <= '9')) return this.#number() ?? 'after-value';
    const literal = LITERALS.find((word) => this.text.startsWith(word, this.#at));
    if (literal === undefined) return this.#fail('unexpected character');
    this.#at += literal.length;
    return 'after-value';
  }

  #key(char: string | undefined): Expecting | Found {
    if (char !== '"') return this.#fail('expected a property name in double quotes');
    const bad = this.#string();
    if (bad) return bad;
    this.#skipWhitespace();
    if (this.text[this.#at] !== ':') return this.#fail("expected ':' after a property name");
    this.#at++;
    return 'value';
  }

  #afterValue(char: string | undefined): Expecting | Found | undefined {
    const closer = this.#closers.at(-1);
    if (closer === undefined) return char === undefined ? undefined : this.#fail('text after the JSON value');
    if (char === ',') {
      this.#at++;
      return closer === '}' ? 'key' : 'value';
    }
    if (char === closer) return this.#close();
    return this.#fail(closer === '}' ? "expected ',' or '}' after a property value" : "expected ',' or ']' after an array element");
  }

  #close(): Expecting {
    this.#at++;
    this.#closers.pop();
    return 'after-value';
  }

  #string(): Found | undefined {
    const start = this.#at++;
    for (;;) {
      const code = this.text.charCodeAt(this.#at);
      if (Number.isNaN(code)) return { offset: start, problem: 'unterminated string' };
      if (code === 0x22) {
        this.#at++;
        return undefined;
      }
      if (code < 0x20) return { offset: this.#at, problem: 'control character in a string' };
      if (code === 0x5c) {
        if (!this.#escape()) return { offset: this.#at, problem: 'invalid escape in a string' };
      } else {
        this.#at++;
      }
    }
  }

  /** Moves past one escape sequence; false when it is not one JSON allows. */
  #escape(): boolean {
    const kind = this.text[this.#at + 1];
    if (kind !== undefined && SIMPLE_ESCAPES.has(kind)) {
      this.#at += 2;
      return true;
    }
    HEX4.lastIndex = this.#at + 2;
    if (kind !== 'u' || !HEX4.test(this.text)) return false;
    this.#at += 6;
    return true;
  }

  #number(): Found | undefined {
    NUMBER.lastIndex = this.#at;
    const match = NUMBER.exec(this.text);
    if (match) this.#at += match[0].length;
    const next = this.text[this.#at];
    if (!match || (next !== undefined && NUMBER_CONTINUATION.test(next))) return this.#fail('invalid number');
    return undefined;
  }

  #fail(problem: string): Found {
    return { offset: this.#at, problem: this.#at >= this.text.length ? 'unexpected end of the text' : problem };
  }

  #skipWhitespace(): void {
    for (;;) {
      const char = this.text[this.#at];
      if (char !== ' ' && char !== '\t' && char !== '\n' && char !== '\r') return;
      this.#at++;
    }
  }
}

function lineAndColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let newline = text.indexOf('\n'); newline !== -1 && newline < offset; newline = text.indexOf('\n', newline + 1)) {
    line++;
    lineStart = newline + 1;
  }
  return { line, column: offset - lineStart + 1 };
}
