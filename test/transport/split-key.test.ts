/**
 * The endpoint's key spelled across several `message.delta` events (a model echoing it token by
 * token): the decoder holds back the deltas that overlap the end of their joined text that may still
 * become the key, until the deltas after them complete the key (then it is redacted across them) or
 * stop matching (then they leave as sent); every delta before that text leaves at once.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HermesFailure } from '../../src/failures.js';
import { SplitKeyGuard } from '../../src/transport/split-key.js';
import { SseDecoder, isSseDone, type SseItem } from '../../src/transport/sse.js';
import type { HermesSseEvent } from '../../src/types.js';
import { caught } from '../helpers/fixtures.js';
import { keyDeltaTextsArb, keyTextArb, redactedItems, releasableCount, splitKeyArb } from '../helpers/split-key-oracle.js';
import { splitAt } from '../helpers/split.js';

const KEY = 'hk_live_7Qm2ZpX9vR4tK8sW';
const LIMITS = { maxFrameBytes: 1 << 20, maxStreamBytes: 1 << 24 };

type Frame = { event: string; [field: string]: unknown };

const delta = (text: string): Frame => ({ event: 'message.delta', delta: text });
const sse = (frames: Frame[]) => Buffer.from(frames.map((frame) => `data: ${JSON.stringify({ run_id: 'run_k', ...frame })}\n\n`).join(''));

/** Each frame pushed as its own network read: what every push returned, and what finish() returned. */
function readFrames(frames: Frame[], key: string | null = KEY) {
  const decoder = new SseDecoder(LIMITS, 'ep1', key ?? undefined);
  const pushes = frames.map((frame) => decoder.push(sse([frame])));
  return { pushes, finished: decoder.finish() };
}

const events = (items: SseItem[]) => items.filter((item): item is HermesSseEvent => !isSseDone(item));
const deltas = (items: SseItem[]) => events(items).map((item) => item.data.delta);
const all = (read: { pushes: SseItem[][]; finished: SseItem[] }) => [...read.pushes.flat(), ...read.finished];

describe('a key split across deltas', () => {
  it('is redacted in the delta where it began and removed from the rest; nothing leaves until it is complete', () => {
    const read = readFrames([delta('the key is hk_li'), delta('ve_7Qm2Zp'), delta('X9vR4tK8sW, keep it'), delta(' safe')]);
    expect(read.pushes.map((items) => items.length)).toEqual([0, 0, 3, 1]);
    expect(deltas(all(read))).toEqual(['the key is [REDACTED]', '', ', keep it', ' safe']);
    expect(read.finished).toEqual([]);
  });

  it('any other event releases the held deltas ahead of it, unchanged: an approval request never waits behind a delta', () => {
    const approval = { event: 'approval.request', command: 'rm -rf ./build' };
    const read = readFrames([delta('about to run a search'), delta(' with hk_live_'), approval, delta('7Qm2ZpX9vR4tK8sW')]);
    // "search" ends with the key's first letter: held until the next delta shows that no key begins in it.
    expect(read.pushes.map((items) => items.length)).toEqual([0, 1, 2, 1]);
    expect(events(read.pushes.flat()).map((item) => [item.event, item.data.delta ?? item.data.command])).toEqual([
      ['message.delta', 'about to run a search'],
      ['message.delta', ' with hk_live_'],
      ['approval.request', 'rm -rf ./build'],
      ['message.delta', '7Qm2ZpX9vR4tK8sW'],
    ]);
  });

  it('two keys in a row, and a key that starts where the previous one ended', () => {
    const read = readFrames([delta(`a ${KEY.slice(0, 5)}`), delta(`${KEY.slice(5)}${KEY.slice(0, 3)}`), delta(`${KEY.slice(3)} b`)]);
    expect(deltas(all(read))).toEqual(['a [REDACTED]', '[REDACTED]', ' b']);
  });

  it('a prefix that is not completed leaves as sent, byte for byte, once a delta stops matching', () => {
    const read = readFrames([delta('hk_li'), delta('ve_'), delta('and something else')]);
    expect(read.pushes.map((items) => items.length)).toEqual([0, 0, 3]);
    expect(deltas(all(read))).toEqual(['hk_li', 've_', 'and something else']);
  });

  it('the terminal event, [DONE] and the end of the stream release what is held, unchanged', () => {
    const terminal = readFrames([delta('see hk_'), { event: 'run.completed', output: 'done' }]);
    expect(terminal.pushes[1]?.map((item) => (isSseDone(item) ? 'DONE' : item.event))).toEqual(['message.delta', 'run.completed']);
    expect(deltas(terminal.pushes[1] ?? [])).toEqual(['see hk_', undefined]);

    const decoder = new SseDecoder(LIMITS, 'ep1', KEY);
    expect(decoder.push(sse([delta('see hk_')]))).toEqual([]);
    const done = decoder.push(Buffer.from('data: [DONE]\n\n'));
    expect(done.map((item) => (isSseDone(item) ? 'DONE' : item.data.delta))).toEqual(['see hk_', 'DONE']);

    const ended = readFrames([delta('see hk_live')]);
    expect(ended.pushes).toEqual([[]]);
    expect(deltas(ended.finished)).toEqual(['see hk_live']);
  });

  it('a fault after held deltas: they are returned before it, as every event before a fault is', () => {
    const decoder = new SseDecoder(LIMITS, 'ep1', KEY);
    expect(decoder.push(sse([delta('see hk_')]))).toEqual([]);
    const before = decoder.push(Buffer.from('data: {not json}\n\n'));
    expect(deltas(before)).toEqual(['see hk_']);
    expect(decoder.failure).toBeInstanceOf(HermesFailure);
    expect(caught(() => decoder.push(sse([delta('x')])))).toBe(decoder.failure);
  });

  it('without a key (the Herm bridge) nothing is held', () => {
    const read = readFrames([delta('hk_li'), delta('ve_7Qm2ZpX9vR4tK8sW')], null);
    expect(read.pushes.map((items) => items.length)).toEqual([1, 1]);
  });

  it('the key cut at every place into two, three and four deltas: joined, the deltas read as the redacted text, and none holds a piece of the key', () => {
    const text = `before ${KEY} between ${KEY} after`;
    const redacted = 'before [REDACTED] between [REDACTED] after';
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 1, max: text.length - 1 }), { maxLength: 3 }), (cuts) => {
        const points = [0, ...cuts.sort((a, b) => a - b), text.length];
        const frames = points.slice(1).map((end, index) => delta(text.slice(points[index], end)));
        const out = deltas(all(readFrames(frames)));
        expect(out).toHaveLength(frames.length);
        expect(out.join('')).toBe(redacted);
        // The key's pieces are gone: every delta is a piece of the redacted text, cut where the original was.
        for (const piece of out) expect(redacted).toContain(piece as string);
      }),
      { numRuns: 300 },
    );
  });
});

describe('only what may still become the key is held', () => {
  it("deltas that end with the key's first letter each leave as soon as the next delta shows that no key begins in them", () => {
    const frames = Array.from({ length: 1000 }, () => delta('search'));
    const read = readFrames(frames);
    expect(read.pushes.map((items) => items.length)).toEqual([0, ...frames.slice(1).map(() => 1)]);
    expect(read.finished).toHaveLength(1);
    expect(deltas(all(read))).toEqual(frames.map((frame) => frame.delta));
  });

  it('a delta that completes one key and starts the next: the deltas of the first key leave, redacted, before the second is complete', () => {
    const read = readFrames([delta('see hk_live_'), delta('7Qm2ZpX9vR4tK8sW, then hk_'), delta('live_7Qm2ZpX9vR4tK8sW.')]);
    expect(read.pushes.map((items) => deltas(items))).toEqual([[], ['see [REDACTED]'], [', then [REDACTED]', '.']]);
  });

  it('property: after every network read, exactly the deltas before the text that may still become the key have left, as the stream reads with the key redacted', () => {
    const deltaFrame = (text: string) => `data: ${JSON.stringify({ run_id: 'run_1', event: 'message.delta', delta: text })}\n\n`;
    const frameArb = (key: string) =>
      fc.oneof(
        { weight: 4, arbitrary: keyDeltaTextsArb(key).map((texts) => texts.map(deltaFrame).join('')) },
        { weight: 1, arbitrary: keyTextArb(key).map((text) => `data: ${JSON.stringify({ run_id: 'run_1', event: 'tool.started', output: text })}\n\n`) },
        { weight: 1, arbitrary: fc.constantFrom(': keepalive\n\n', 'data: [DONE]\n\n', 'data: {"event": "message.delta", "delta": 1}\n\n') },
      );
    const streamArb = splitKeyArb.chain((key) =>
      fc.record({
        key: fc.constant(key),
        frames: fc.array(frameArb(key), { maxLength: 8 }),
        fault: fc.boolean(),
        cuts: fc.array(fc.nat(), { maxLength: 12 }),
      }),
    );
    fc.assert(
      fc.property(streamArb, ({ key, frames, fault, cuts }) => {
        const bytes = Buffer.from(frames.join('') + (fault ? 'data: {not json}\n\n' : ''));
        const plain = new SseDecoder(LIMITS, 'ep1');
        const keyed = new SseDecoder(LIMITS, 'ep1', key);
        const seen: SseItem[] = [];
        const left: SseItem[] = [];
        for (const read of splitAt(bytes, cuts)) {
          seen.push(...pushed(plain, read));
          left.push(...pushed(keyed, read));
          const releasable = plain.failure ? seen.length : releasableCount(seen, key);
          expect(left).toEqual(redactedItems(seen, key).slice(0, releasable));
          if (plain.failure) return;
        }
        left.push(...keyed.finish());
        expect(left).toEqual(redactedItems(seen, key));
      }),
      { numRuns: 2000 },
    );
  });

  it('the work per delta does not grow with the deltas before it: the characters the guard searches per delta stay the same for 2,000 and 20,000 deltas', () => {
    const perDelta = (count: number) => {
      const guard = new SplitKeyGuard(KEY);
      const items = Array.from({ length: count }, () => ({ event: 'message.delta', data: { delta: 'h' } }));
      let left = 0;
      const searched = countingSearchedCharacters(() => {
        for (const item of items) left += guard.sift([item], false).length;
      });
      expect(left).toBe(count - 1);
      return searched / count;
    };
    const few = perDelta(2000);
    const many = perDelta(20_000);
    expect(many).toBeLessThanOrEqual(few * 1.01);
    // A delta is compared with what is held (shorter than the key) and itself, a few times over.
    expect(many).toBeLessThanOrEqual(4 * KEY.length);
  });
});

/** A push's items; none when it throws the decoder's failure. */
function pushed(decoder: SseDecoder, read: Uint8Array): SseItem[] {
  try {
    return decoder.push(read);
  } catch (error) {
    expect(error).toBe(decoder.failure);
    return [];
  }
}

/**
 * Runs `work` and counts the characters of every string searched or copied by String methods
 * meanwhile: a search of a string may read all of it (a joined string is also flattened by the
 * first search), so the sum is an upper bound of the characters examined.
 */
function countingSearchedCharacters(work: () => void): number {
  const methods = ['indexOf', 'lastIndexOf', 'includes', 'startsWith', 'endsWith', 'slice'] as const;
  const originals = methods.map((name) => String.prototype[name]);
  let characters = 0;
  methods.forEach((name, index) => {
    const original = originals[index] as (...args: unknown[]) => unknown;
    Object.defineProperty(String.prototype, name, {
      configurable: true,
      writable: true,
      value(this: string, ...args: unknown[]) {
        characters += this.length;
        return original.apply(this, args);
      },
    });
  });
  try {
    work();
  } finally {
    methods.forEach((name, index) => {
      Object.defineProperty(String.prototype, name, { configurable: true, writable: true, value: originals[index] });
    });
  }
  return characters;
}
