import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HermesFailure } from '../../src/failures.js';
import { SplitKeyGuard } from '../../src/transport/split-key.js';
import { SseDecoder, type SseDecoderLimits } from '../../src/transport/sse.js';
import { ReferenceSseDecoder } from '../helpers/reference-sse-decoder.js';
import { splitAt } from '../helpers/split.js';

/**
 * The decoder against the reference, an independent write of the layer around eventsource-parser
 * (a frame byte count walked byte by byte where the decoder searches, its own CR handling, key
 * watch and event checks, as they were before issue #17): for any bytes, split anywhere, with or
 * without a key to redact and under any limits, every push gives the same items, the same throw
 * and the same `failure`, and the end of the stream the same held-back events. The reference
 * predates the hold-back of a key split across deltas, so its events go through a SplitKeyGuard
 * here, as in the decoder; the guard itself is tested in split-key.test.ts.
 */

interface Decoder {
  push(chunk: Uint8Array): unknown[];
  finish(): unknown[];
  readonly failure: HermesFailure | undefined;
}

class GuardedReference implements Decoder {
  readonly #reference: ReferenceSseDecoder;
  readonly #guard: SplitKeyGuard | undefined;

  constructor(limits: SseDecoderLimits, secret: string | undefined) {
    this.#reference = new ReferenceSseDecoder(limits, 'ep1', secret);
    this.#guard = secret === undefined ? undefined : new SplitKeyGuard(secret);
  }

  get failure(): HermesFailure | undefined {
    return this.#reference.failure;
  }

  push(chunk: Uint8Array): unknown[] {
    let items: object[] = [];
    let thrown: unknown;
    try {
      items = this.#reference.push(chunk) as object[];
    } catch (error) {
      thrown = error;
    }
    const out = this.#guard ? this.#guard.sift(items, this.#reference.failure !== undefined) : items;
    if (thrown !== undefined && out.length === 0) throw thrown;
    return out;
  }

  finish(): unknown[] {
    const out: object[] = [];
    this.#guard?.release(out);
    return out;
  }
}

type Step = { items: unknown[] } | { throws: string } | { finished: unknown[] };

function run(decoder: Decoder, chunks: Uint8Array[]): { steps: Step[]; failure: string | undefined } {
  const steps: Step[] = [];
  for (const chunk of chunks) {
    try {
      // The marker is compared by shape: each decoder has its own frozen object.
      steps.push({ items: decoder.push(chunk).map((item) => (isDoneLike(item) ? { kind: 'done' } : item)) });
    } catch (error) {
      expect(error).toBeInstanceOf(HermesFailure);
      steps.push({ throws: (error as HermesFailure).message });
      return { steps, failure: decoder.failure?.message };
    }
  }
  steps.push({ finished: decoder.finish() });
  return { steps, failure: decoder.failure?.message };
}

function isDoneLike(item: unknown): boolean {
  return (item as { kind?: unknown }).kind === 'done' && Object.keys(item as object).length === 1;
}

function expectSame(buffer: Uint8Array, cuts: number[], limits: SseDecoderLimits, secret: string | undefined): void {
  // Empty chunks are left out: the reference forgets a CR that ended one read when an empty read
  // follows (a CRLF split by an empty read becomes two line ends); the decoder does not (below).
  const chunks = splitAt(buffer, cuts).filter((chunk) => chunk.length > 0);
  const ours = run(new SseDecoder(limits, 'ep1', secret), chunks);
  const reference = run(new GuardedReference(limits, secret), chunks);
  expect(ours).toStrictEqual(reference);
}

const KEY = 'hk_diff_canary_0123456789';
const QUOTED_KEY = 'hk/diff"canary\\42';
const spell = (key: string) => [...key].map((char) => `\\u00${char.charCodeAt(0).toString(16).padStart(2, '0')}`).join('');

const ending = fc.constantFrom('\n', '\r\n', '\r');
const piece = fc.oneof(
  fc.constantFrom('é', '😀', '€', 'a', ' ', '"', '\\', '\t', '\u0000', '\u2028', ':', '\\n', '\\u00e9', '\\u0041', '\\"', '\\/', '[DONE]'),
  fc.constantFrom(KEY, KEY.slice(0, 7), spell(KEY), spell(KEY).slice(0, 11), QUOTED_KEY, spell(QUOTED_KEY)),
  fc.string({ unit: 'grapheme', maxLength: 6 }),
);
const text = fc.array(piece, { maxLength: 10 }).map((parts) => parts.join(''));

/** One SSE line, well-formed or not: every field the specification knows, and some it does not. */
const line = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .tuple(text, fc.integer({ min: -5, max: 5 }), fc.constantFrom('run_1', 'run_2', 7))
      .map(([delta, n, run_id]) => `data: ${JSON.stringify({ event: n === 0 ? 'run.completed' : 'message.delta', run_id, delta, n })}`),
  },
  { weight: 2, arbitrary: text.map((value) => `data:${JSON.stringify({ type: value })}`) },
  {
    weight: 1,
    arbitrary: fc.constantFrom('data: [DONE]', 'data:  [DONE] ', 'data: {"event": "a",', 'data:  "x": 1}', 'data: 12', 'data: null', 'data: {"event": ""}'),
  },
  { weight: 1, arbitrary: fc.constantFrom('data', 'data:', 'event', 'event:', 'id', 'id:', ':', ': keepalive', 'retry: 10', 'retry', 'foo: bar', 'foo') },
  { weight: 2, arbitrary: text.map((value) => `event: ${value}`) },
  { weight: 2, arbitrary: text.map((value) => `id: ${value}`) },
  { weight: 1, arbitrary: text.map((value) => `id:${value}\u0000`) },
  { weight: 1, arbitrary: text.map((value) => `: ${value}`) },
  { weight: 1, arbitrary: text.map((value) => `event:${value}`) },
  { weight: 1, arbitrary: text },
);

const stream = fc
  .tuple(
    fc.boolean(),
    fc.array(fc.tuple(line, ending, fc.boolean()), { maxLength: 14 }),
    fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 2 }),
  )
  .map(([bom, lines, corruptions]) => {
    let body = bom ? '\ufeff' : '';
    for (const [content, end, blank] of lines) body += `${content}${end}${blank ? end : ''}`;
    const bytes = Buffer.from(body, 'utf8');
    for (const [at, byte] of corruptions) if (bytes.length > 0) bytes[at % bytes.length] = byte;
    return bytes;
  })
  // eventsource-parser also drops "ï»¿" (a BOM decoded as Latin-1) when it starts its first feed: no UTF-8 stream means that.
  .filter((bytes) => !bytes.subarray(0, 2).equals(Buffer.from('ï', 'utf8')));

const secret = fc.constantFrom(undefined, KEY, QUOTED_KEY);
const limits = fc.oneof(
  fc.constant({ maxFrameBytes: 1 << 20, maxStreamBytes: 1 << 24 }),
  fc
    .tuple(fc.integer({ min: 1, max: 300 }), fc.integer({ min: 0, max: 2000 }))
    .map(([maxFrameBytes, extra]) => ({ maxFrameBytes, maxStreamBytes: maxFrameBytes + extra })),
);

describe('the SSE decoder against the eventsource-parser reference', () => {
  it('property: structured streams (CR, LF, CRLF, every field, bad frames, a key to redact, limits), split anywhere', () => {
    fc.assert(
      fc.property(stream, fc.array(fc.nat(), { maxLength: 24 }), limits, secret, (bytes, cuts, limit, key) => expectSame(bytes, cuts, limit, key)),
      { seed: 20261201, numRuns: 3000 },
    );
  });

  it('property: the same streams byte by byte', () => {
    fc.assert(
      fc.property(stream, secret, (bytes, key) =>
        expectSame(
          bytes,
          Array.from({ length: bytes.length }, (_, i) => i),
          { maxFrameBytes: 1 << 20, maxStreamBytes: 1 << 24 },
          key,
        ),
      ),
      { seed: 20261202, numRuns: 300 },
    );
  });

  it('property: arbitrary bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.array(fc.nat(), { maxLength: 16 }), limits, secret, (bytes, cuts, limit, key) =>
        expectSame(Buffer.from(bytes), cuts, limit, key),
      ),
      { seed: 20261203, numRuns: 2000 },
    );
  });

  it('a CRLF split by an empty read is still one line end (the reference saw a blank line and cut the frame)', () => {
    const decoder = new SseDecoder({ maxFrameBytes: 1 << 20, maxStreamBytes: 1 << 24 }, 'ep1');
    const items = [
      ...decoder.push(Buffer.from('data: {"event": "a",\r')),
      ...decoder.push(Buffer.alloc(0)),
      ...decoder.push(Buffer.from('\ndata:  "x": 1}\r\n\r\n')),
    ];
    expect(items).toStrictEqual([{ event: 'a', data: { event: 'a', x: 1 } }]);
    expect(decoder.failure).toBeUndefined();
  });
});
