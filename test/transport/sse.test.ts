import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HermesFailure } from '../../src/failures.js';
import { SseDecoder, isSseDone, type SseDecoderLimits, type SseItem } from '../../src/transport/sse.js';
import { captureSseBody, captureSseChunks, caught } from '../helpers/fixtures.js';
import { splitAt } from '../helpers/split.js';

const ROOMY: SseDecoderLimits = { maxFrameBytes: 1 << 20, maxStreamBytes: 1 << 24 };

function decoder(limits: SseDecoderLimits = ROOMY): SseDecoder {
  return new SseDecoder(limits, 'ep1');
}

function bytes(text: string): Buffer {
  return Buffer.from(text, 'utf8');
}

/** Pushes every chunk in order and returns all items. */
function decodeChunks(chunks: Uint8Array[], limits: SseDecoderLimits = ROOMY): SseItem[] {
  const d = decoder(limits);
  return chunks.flatMap((chunk) => d.push(chunk));
}

function decodeWhole(buffer: Uint8Array, limits: SseDecoderLimits = ROOMY): SseItem[] {
  return decodeChunks([buffer], limits);
}

function byteByByte(buffer: Uint8Array): Uint8Array[] {
  return Array.from({ length: buffer.length }, (_, i) => buffer.subarray(i, i + 1));
}

function expectInvalid(fn: () => unknown): HermesFailure {
  const error = caught(fn);
  expect(error).toBeInstanceOf(HermesFailure);
  const failure = error as HermesFailure;
  expect(failure.code).toBe('invalid_response');
  expect(failure.effect).toBe('known');
  expect(failure.remoteStatus).toBe(200);
  expect(failure.message).toContain('ep1');
  return failure;
}

/** One push returns exactly the items before the fault; the fault is then `failure`, and the next push throws it. */
function expectPositional(buffer: Uint8Array, limits: SseDecoderLimits, before: SseItem[]): void {
  const d = decoder(limits);
  expect(d.push(buffer)).toStrictEqual(before);
  expect(d.failure).toBe(expectInvalid(() => d.push(bytes('data: {"event": "c"}\n\n'))));
}

function event(name: string, data: Record<string, unknown>, id?: string): SseItem {
  return id === undefined ? { event: name, data } : { event: name, data, id };
}

const RUN_02 = 'run_d1d361d6646c4f4db2bf950d124a8fc4';
const EXPECTED_02: SseItem[] = [
  event('message.delta', { event: 'message.delta', run_id: RUN_02, timestamp: 1796032842.009136, delta: 'Checking ' }),
  event('message.delta', { event: 'message.delta', run_id: RUN_02, timestamp: 1796032842.0091949, delta: 'the disk.' }),
  event('tool.started', { event: 'tool.started', run_id: RUN_02, timestamp: 1796032842.0092103, tool: 'terminal', preview: 'rm -rf ./build' }),
  event('approval.request', {
    command: 'rm -rf ./build',
    pattern_key: 'recursive delete',
    pattern_keys: ['recursive delete'],
    description: 'recursive delete',
    event: 'approval.request',
    run_id: RUN_02,
    timestamp: 1796032842.0093544,
    choices: ['once', 'session', 'always', 'deny'],
  }),
  event('approval.responded', { event: 'approval.responded', run_id: RUN_02, timestamp: 1796032842.0154886, choice: 'once', resolved: 1 }),
  event('tool.completed', { event: 'tool.completed', run_id: RUN_02, timestamp: 1796032842.0160007, tool: 'terminal', duration: 0.007, error: false }),
  event('reasoning.available', { event: 'reasoning.available', run_id: RUN_02, timestamp: 1796032842.0160255, text: 'cleanup done' }),
  event('run.completed', {
    event: 'run.completed',
    run_id: RUN_02,
    timestamp: 1796032842.7167833,
    output: 'Removed ./build.',
    usage: { input_tokens: 12, output_tokens: 5, total_tokens: 17 },
  }),
];

const RUN_21 = 'run_428510a3ff8e4b3290ce942d425143ed';
const EXPECTED_21: SseItem[] = [
  event('message.delta', { event: 'message.delta', run_id: RUN_21, timestamp: 1796032843.7387116, delta: 'working' }),
  event('run.cancelled', { event: 'run.cancelled', run_id: RUN_21, timestamp: 1796032844.140147 }),
];

describe('captured Hermes streams', () => {
  const body02 = captureSseBody('02-events-lifecycle.http');
  const body21 = captureSseBody('21-events-cancelled.http');

  it('the de-chunked captures are data:-only frames with keepalive and stream-closed comments', () => {
    const text = body02.toString('utf8');
    expect(text.startsWith('data: {"event": "message.delta"')).toBe(true);
    expect(text.split(': keepalive\n\n')).toHaveLength(3);
    expect(text.endsWith(': stream closed\n\n')).toBe(true);
    expect(body21.toString('utf8').endsWith(': stream closed\n\n')).toBe(true);
  });

  it('02-events-lifecycle yields its eight events in order, comments ignored', () => {
    const items = decodeWhole(body02);
    expect(items).toStrictEqual(EXPECTED_02);
  });

  it('02-events-lifecycle gives the same events chunk by chunk (as sent) and byte by byte', () => {
    const chunks = captureSseChunks('02-events-lifecycle.http');
    expect(chunks.length).toBe(11);
    expect(decodeChunks(chunks)).toStrictEqual(EXPECTED_02);
    expect(decodeChunks(byteByByte(body02))).toStrictEqual(EXPECTED_02);
  });

  it('each HTTP chunk of 02 completes exactly its own event (nothing is held back)', () => {
    const d = decoder();
    const perChunk = captureSseChunks('02-events-lifecycle.http').map((chunk) => d.push(chunk).length);
    expect(perChunk).toEqual([1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0]);
  });

  it('21-events-cancelled yields message.delta then run.cancelled', () => {
    expect(decodeWhole(body21)).toStrictEqual(EXPECTED_21);
    expect(decodeChunks(captureSseChunks('21-events-cancelled.http'))).toStrictEqual(EXPECTED_21);
    expect(decodeChunks(byteByByte(body21))).toStrictEqual(EXPECTED_21);
  });

  it('02 with CRLF line endings yields the same events', () => {
    const crlf = bytes(body02.toString('utf8').replace(/\n/g, '\r\n'));
    expect(decodeWhole(crlf)).toStrictEqual(EXPECTED_02);
    expect(decodeChunks(byteByByte(crlf))).toStrictEqual(EXPECTED_02);
  });

  it('02 with CR line endings yields the same events', () => {
    const cr = bytes(body02.toString('utf8').replace(/\n/g, '\r'));
    expect(decodeWhole(cr)).toStrictEqual(EXPECTED_02);
    expect(decodeChunks(byteByByte(cr))).toStrictEqual(EXPECTED_02);
  });

  it('counts every byte it read', () => {
    const d = decoder();
    d.push(body02);
    expect(d.bytesRead).toBe(body02.length);
  });
});

describe('frames and fields', () => {
  it('ignores keepalive and stream-closed comments entirely', () => {
    expect(decodeWhole(bytes(': keepalive\n\n: keepalive\n\n: stream closed\n\n'))).toEqual([]);
    expect(decodeWhole(bytes(':\n\n:no space\n\n'))).toEqual([]);
  });

  it('takes the event name from the data when there is no event: line, and records no id', () => {
    const items = decodeWhole(bytes('data: {"event": "message.delta", "delta": "hi"}\n\n'));
    expect(items).toStrictEqual([event('message.delta', { event: 'message.delta', delta: 'hi' })]);
    const first = items[0];
    expect(first !== undefined && !isSseDone(first) && 'id' in first).toBe(false);
  });

  it('lets an event: line take precedence over the data event field', () => {
    expect(decodeWhole(bytes('event: tool.progress\ndata: {"event": "message.delta", "delta": "x"}\n\n'))).toStrictEqual([
      event('tool.progress', { event: 'message.delta', delta: 'x' }),
    ]);
    expect(decodeWhole(bytes('event:run.failed\ndata:{"error":"boom"}\n\n'))).toStrictEqual([event('run.failed', { error: 'boom' })]);
  });

  it('tolerates id: lines and records the id on the event that carries it', () => {
    const items = decodeWhole(bytes('id: 41\ndata: {"event": "a"}\n\ndata: {"event": "b"}\n\nid:7\nevent: c\ndata: {"event": "x"}\n\n'));
    expect(items).toStrictEqual([event('a', { event: 'a' }, '41'), event('b', { event: 'b' }), event('c', { event: 'x' }, '7')]);
  });

  it('gives {kind: done} for [DONE]', () => {
    expect(decodeWhole(bytes('data: [DONE]\n\n'))).toStrictEqual([{ kind: 'done' }]);
    expect(decodeWhole(bytes('data: {"event": "a"}\n\ndata: [DONE]\n\n'))).toStrictEqual([event('a', { event: 'a' }), { kind: 'done' }]);
  });

  it('joins multi-line data with newlines before parsing it', () => {
    const text = 'data: {"event":\ndata: "message.delta",\ndata: "delta": "two\\nlines"}\n\n';
    expect(decodeWhole(bytes(text))).toStrictEqual([event('message.delta', { event: 'message.delta', delta: 'two\nlines' })]);
    expect(decodeWhole(bytes(text.replace(/\n/g, '\r\n')))).toStrictEqual([event('message.delta', { event: 'message.delta', delta: 'two\nlines' })]);
  });

  it('handles CRLF frames, also when every CRLF pair is split across pushes', () => {
    const text = 'data: {"event": "a"}\r\n\r\n: keepalive\r\n\r\ndata: {"event": "b"}\r\n\r\n';
    const expected = [event('a', { event: 'a' }), event('b', { event: 'b' })];
    expect(decodeWhole(bytes(text))).toStrictEqual(expected);
    const buffer = bytes(text);
    const cuts: number[] = [];
    buffer.forEach((byte, i) => {
      if (byte === 0x0d) cuts.push(i + 1);
    });
    expect(decodeChunks(splitAt(buffer, cuts))).toStrictEqual(expected);
  });

  it('handles CR-only frames: a complete frame is yielded by the push that completes it', () => {
    expect(decodeWhole(bytes('data: {"event": "a"}\r\rdata: {"event": "b"}\r\r'))).toStrictEqual([event('a', { event: 'a' }), event('b', { event: 'b' })]);
    const d = decoder();
    expect(d.push(bytes('data: {"event": "run.completed", "output": "done"}\r\r'))).toStrictEqual([
      event('run.completed', { event: 'run.completed', output: 'done' }),
    ]);
  });

  it('keeps raw UTF-8 text intact', () => {
    expect(decodeWhole(bytes('data: {"event": "message.delta", "delta": "café 😀 €"}\n\n'))).toStrictEqual([
      event('message.delta', { event: 'message.delta', delta: 'café 😀 €' }),
    ]);
  });

  it('drops a byte order mark at the start, but not the characters "ï»¿" (eventsource-parser drops those from its first feed)', () => {
    expect(decodeWhole(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes('data: {"event": "a"}\n\n')]))).toStrictEqual([event('a', { event: 'a' })]);
    // "ï»¿data" is a field of another name, ignored: no event.
    expect(decodeWhole(bytes('ï»¿data: {"event": "a"}\n\ndata: {"event": "b"}\n\n'))).toStrictEqual([event('b', { event: 'b' })]);
  });

  it('does not yield a frame until its blank line arrives', () => {
    const d = decoder();
    expect(d.push(bytes('data: {"event": "a"}\n'))).toEqual([]);
    expect(d.push(bytes('\n'))).toStrictEqual([event('a', { event: 'a' })]);
  });
});

describe('bad frames are invalid_response', () => {
  it.each([
    ['non-JSON data', 'data: hello world\n\n'],
    ['truncated JSON', 'data: {"event": "a"\n\n'],
    ['a JSON array', 'data: [{"event": "a"}]\n\n'],
    ['a JSON string', 'data: "message.delta"\n\n'],
    ['a JSON number', 'data: 42\n\n'],
    ['JSON null', 'data: null\n\n'],
    ['no event name', 'data: {"delta": "x"}\n\n'],
    ['an empty event name', 'data: {"event": ""}\n\n'],
    ['a numeric event name', 'data: {"event": 5}\n\n'],
    ['an object event name', 'data: {"event": {"name": "a"}}\n\n'],
    ['an empty data line', 'data:\n\n'],
  ])('refuses %s', (_name, text) => {
    expectInvalid(() => decodeWhole(bytes(text)));
  });

  it('refuses a bad frame that follows good ones in the same push, after returning the good ones', () => {
    expectPositional(bytes('data: {"event": "a"}\n\ndata: nope\n\ndata: {"event": "b"}\n\n'), ROOMY, [event('a', { event: 'a' })]);
  });

  it('keeps failing once a frame was bad', () => {
    const d = decoder();
    expectInvalid(() => d.push(bytes('data: nope\n\n')));
    expectInvalid(() => d.push(bytes('data: {"event": "a"}\n\n')));
  });

  it('refuses invalid UTF-8 inside a data line (0xff 0xfe)', () => {
    const buffer = Buffer.concat([bytes('data: {"event": "message.delta", "delta": "'), Buffer.from([0xff, 0xfe]), bytes('"}\n\n')]);
    expectInvalid(() => decodeWhole(buffer));
    expectInvalid(() => decodeChunks(byteByByte(buffer)));
  });

  it('refuses invalid UTF-8 that follows a good frame in the same push, after returning the frame', () => {
    expectPositional(Buffer.concat([bytes('data: {"event": "a"}\n\ndata: {"x": "'), Buffer.from([0xff]), bytes('"}\n\n')]), ROOMY, [
      event('a', { event: 'a' }),
    ]);
  });

  it('refuses other invalid UTF-8: a bad continuation split across pushes, an overlong encoding, a lone surrogate', () => {
    expectInvalid(() =>
      decodeChunks([Buffer.concat([bytes('data: {"event": "a", "x": "'), Buffer.from([0xc3])]), Buffer.concat([Buffer.from([0x28]), bytes('"}\n\n')])]),
    );
    expectInvalid(() => decodeWhole(Buffer.concat([bytes('data: {"event": "a", "x": "'), Buffer.from([0xc0, 0xaf]), bytes('"}\n\n')])));
    expectInvalid(() => decodeWhole(Buffer.concat([bytes('data: {"event": "a", "x": "'), Buffer.from([0xed, 0xa0, 0x80]), bytes('"}\n\n')])));
  });
});

describe('size limits', () => {
  const LIMIT = 64;
  const small: SseDecoderLimits = { maxFrameBytes: LIMIT, maxStreamBytes: 1 << 20 };
  const bigFrame = bytes(`data: {"event": "message.delta", "delta": "${'x'.repeat(200)}"}\n\n`);
  const smallFrame = bytes('data: {"event": "a"}\n\n');

  it('accepts many frames under the frame limit in one push', () => {
    expect(smallFrame.length).toBeLessThan(LIMIT);
    const many = Buffer.concat(Array.from({ length: 100 }, () => smallFrame));
    expect(decodeWhole(many, small)).toHaveLength(100);
    expect(decodeChunks(byteByByte(many), small)).toHaveLength(100);
  });

  it('refuses a frame over the limit fed one byte at a time, as soon as the limit is passed', () => {
    const d = decoder(small);
    let pushed = 0;
    const error = caught(() => {
      for (const byte of byteByByte(bigFrame)) {
        d.push(byte);
        pushed += 1;
      }
    });
    expect(error).toBeInstanceOf(HermesFailure);
    expect((error as HermesFailure).code).toBe('invalid_response');
    // The byte that would make the pending frame LIMIT + 1 bytes long is refused.
    expect(pushed).toBe(LIMIT);
  });

  it('refuses a line that never ends before buffering more than the limit', () => {
    const d = decoder(small);
    const piece = bytes('xxxxxxx');
    let accepted = 0;
    expectInvalid(() => {
      d.push(bytes('data: '));
      accepted += 6;
      for (;;) {
        d.push(piece);
        accepted += piece.length;
      }
    });
    expect(accepted).toBeLessThanOrEqual(LIMIT);
    expect(accepted + piece.length).toBeGreaterThan(LIMIT);
  });

  it('refuses a comment line that never ends', () => {
    const d = decoder(small);
    expectInvalid(() => {
      for (let i = 0; i < 100; i += 1) d.push(bytes(': keepalive keepalive keepalive'));
    });
  });

  it('refuses a frame over the limit that arrives whole in one push', () => {
    expectInvalid(() => decodeWhole(bigFrame, small));
  });

  it('refuses a frame over the limit between small frames in one push, after returning the frames before it', () => {
    expectPositional(Buffer.concat([smallFrame, bigFrame, smallFrame]), small, [event('a', { event: 'a' })]);
  });

  it('refuses a frame over the limit split into two pushes that are each under the limit', () => {
    const limits: SseDecoderLimits = { maxFrameBytes: 150, maxStreamBytes: 1 << 20 };
    const half = Math.ceil(bigFrame.length / 2);
    expect(half).toBeLessThanOrEqual(150);
    expect(bigFrame.length).toBeGreaterThan(150);
    expectInvalid(() => decodeChunks([bigFrame.subarray(0, half), bigFrame.subarray(half)], limits));
  });

  it('refuses a stream over maxStreamBytes and accepts one exactly at it', () => {
    const stream = Buffer.concat(Array.from({ length: 10 }, () => smallFrame));
    const exact: SseDecoderLimits = { maxFrameBytes: LIMIT, maxStreamBytes: stream.length };
    expect(decodeWhole(stream, exact)).toHaveLength(10);
    const tight: SseDecoderLimits = { maxFrameBytes: LIMIT, maxStreamBytes: stream.length - 1 };
    expectPositional(
      stream,
      tight,
      Array.from({ length: 9 }, () => event('a', { event: 'a' })),
    );
    // Frame by frame, the push that crosses the limit is the one refused.
    const d = decoder({ maxFrameBytes: LIMIT, maxStreamBytes: smallFrame.length * 3 + 5 });
    expect(d.push(smallFrame)).toHaveLength(1);
    expect(d.push(smallFrame)).toHaveLength(1);
    expect(d.push(smallFrame)).toHaveLength(1);
    expectInvalid(() => d.push(smallFrame));
  });

  it('counts keepalive comments towards the stream limit', () => {
    const d = decoder({ maxFrameBytes: LIMIT, maxStreamBytes: 100 });
    expectInvalid(() => {
      for (let i = 0; i < 20; i += 1) d.push(bytes(': keepalive\n\n'));
    });
  });
});

describe('chunking never changes the result', () => {
  const sample = bytes(
    'data: {"event": "message.delta", "delta": "é😀€"}\r\n\r\n' +
      ': keepalive\n\n' +
      'event: tool.started\r\nid: 9\r\ndata: {"tool": "t", "preview": "ü"}\r\n\r\n' +
      'data: {"event": "message.delta",\ndata:  "delta": "😀"}\n\n' +
      'data: {"event": "run.completed", "output": "fin é"}\n\n: stream closed\n\n',
  );
  const expected: SseItem[] = [
    event('message.delta', { event: 'message.delta', delta: 'é😀€' }),
    event('tool.started', { tool: 't', preview: 'ü' }, '9'),
    event('message.delta', { event: 'message.delta', delta: '😀' }),
    event('run.completed', { event: 'run.completed', output: 'fin é' }),
  ];

  it('one push gives the expected events', () => {
    expect(decodeWhole(sample)).toStrictEqual(expected);
  });

  it('every single cut (inside é, 😀 and CRLF too) gives the same events', () => {
    for (let cut = 0; cut <= sample.length; cut += 1) {
      expect(decodeChunks([sample.subarray(0, cut), sample.subarray(cut)])).toStrictEqual(expected);
    }
  });

  it('byte by byte gives the same events', () => {
    expect(decodeChunks(byteByByte(sample))).toStrictEqual(expected);
  });

  type Ending = '\n' | '\r\n' | '\r';
  type Frame =
    | { kind: 'event'; name: string; text: string; n: number; eventLine: string | null; id: string | null; multiline: boolean; ending: Ending }
    | { kind: 'comment'; text: string; ending: Ending }
    | { kind: 'done'; ending: Ending };

  const endingArb = fc.constantFrom<Ending>('\n', '\r\n', '\r');
  const textArb = fc
    .array(
      fc.oneof(fc.constantFrom('é', '😀', '€', 'a', ' ', '"', '\\', '\t', '\u0000', '\u2028', '\r', '\n', ':'), fc.string({ unit: 'grapheme', maxLength: 6 })),
      {
        maxLength: 12,
      },
    )
    .map((parts) => parts.join(''));
  const frameArb: fc.Arbitrary<Frame> = fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant('event' as const),
        name: fc.constantFrom('message.delta', 'tool.started', 'tool.completed', 'approval.request', 'reasoning.available', 'run.completed'),
        text: textArb,
        n: fc.integer({ min: -1000, max: 1000 }),
        eventLine: fc.option(fc.constantFrom('custom.one', 'tool.progress', 'é.event'), { nil: null }),
        id: fc.option(fc.constantFrom('1', '42', 'evt-😀', 'a b'), { nil: null }),
        multiline: fc.boolean(),
        ending: endingArb,
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({ kind: fc.constant('comment' as const), text: fc.constantFrom('keepalive', '', 'stream closed', 'é 😀'), ending: endingArb }),
    },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('done' as const), ending: endingArb }) },
  );

  function serialize(frames: Frame[]): { buffer: Buffer; expected: SseItem[] } {
    let text = '';
    const expectedItems: SseItem[] = [];
    for (const frame of frames) {
      const e = frame.ending;
      if (frame.kind === 'comment') {
        text += `:${frame.text === '' ? '' : ` ${frame.text}`}${e}${e}`;
      } else if (frame.kind === 'done') {
        text += `data: [DONE]${e}${e}`;
        expectedItems.push({ kind: 'done' });
      } else {
        const data = { event: frame.name, run_id: 'run_1', delta: frame.text, n: frame.n };
        const json = frame.multiline ? JSON.stringify(data, null, 1) : JSON.stringify(data);
        if (frame.eventLine !== null) text += `event: ${frame.eventLine}${e}`;
        if (frame.id !== null) text += `id: ${frame.id}${e}`;
        for (const line of json.split('\n')) text += `data: ${line}${e}`;
        text += e;
        expectedItems.push(event(frame.eventLine ?? frame.name, data, frame.id ?? undefined));
      }
    }
    // Hermes ends every stream with this comment.
    text += ': stream closed\n\n';
    return { buffer: bytes(text), expected: expectedItems };
  }

  it('property: any split of a valid stream gives exactly the events of one push (and of the model)', () => {
    fc.assert(
      fc.property(fc.array(frameArb, { maxLength: 12 }), fc.array(fc.nat(), { maxLength: 48 }), fc.boolean(), (frames, cuts, tiny) => {
        const { buffer, expected: model } = serialize(frames);
        const whole = decodeWhole(buffer);
        expect(whole).toStrictEqual(model);
        const chunks = tiny ? byteByByte(buffer) : splitAt(buffer, cuts);
        expect(decodeChunks(chunks)).toStrictEqual(whole);
      }),
      { seed: 42, numRuns: 200 },
    );
  });

  const hostileBytes = fc.oneof(
    fc.uint8Array({ maxLength: 400 }),
    fc
      .array(
        fc.oneof(
          fc
            .constantFrom(
              'data: ',
              'data:',
              'event: ',
              'id: ',
              'retry: x',
              ': ',
              '{',
              '}',
              '[',
              ']',
              '"event"',
              '"a"',
              ':',
              ',',
              '[DONE]',
              '\n',
              '\r',
              '\r\n',
              '\n\n',
              'é',
              '😀',
              'null',
              '1',
            )
            .map((s) => bytes(s)),
          fc.uint8Array({ minLength: 1, maxLength: 3 }),
        ),
        { maxLength: 80 },
      )
      .map((parts) => Buffer.concat(parts)),
  );

  it('property: arbitrary bytes never throw anything but HermesFailure invalid_response', () => {
    fc.assert(
      fc.property(
        hostileBytes,
        fc.array(fc.nat(), { maxLength: 32 }),
        fc.integer({ min: 1, max: 256 }),
        fc.integer({ min: 0, max: 1024 }),
        (buffer, cuts, maxFrameBytes, extra) => {
          const d = new SseDecoder({ maxFrameBytes, maxStreamBytes: maxFrameBytes + extra }, 'ep1');
          try {
            for (const chunk of splitAt(buffer, cuts)) {
              for (const item of d.push(chunk)) {
                if (!isSseDone(item)) {
                  expect(typeof item.event).toBe('string');
                  expect(item.event).not.toBe('');
                  expect(item.data).toBeTypeOf('object');
                  expect(Array.isArray(item.data)).toBe(false);
                  // All the run_events output schema asks of an item (run_events skips checking them: checkedOutput).
                  expect(Object.keys(item).every((key) => key === 'event' || key === 'data' || (key === 'id' && typeof item.id === 'string'))).toBe(true);
                }
              }
            }
          } catch (error) {
            expect(error).toBeInstanceOf(HermesFailure);
            expect((error as HermesFailure).code).toBe('invalid_response');
          }
        },
      ),
      { seed: 42, numRuns: 300 },
    );
  });
});

describe('the endpoint key is redacted however the network splits it', () => {
  const key = 'hk_split_canary_0123456789';
  const spelled = [...key].map((char) => `\\u00${char.charCodeAt(0).toString(16)}`).join('');
  const frames = [
    `data: {"event": "message.delta", "delta": "before ${key} after"}\n\n`,
    `data: {"event": "message.delta", "delta": "spelled ${spelled}"}\n\n`,
    `event: ${key}\ndata: {"event": "x", "n": 1}\n\n`,
  ];
  const limits: SseDecoderLimits = { maxFrameBytes: 1 << 20, maxStreamBytes: 1 << 24 };

  it.each(frames.map((frame, index) => [index, frame]))('frame %i, split at every byte', (_index, frame) => {
    const bytes = Buffer.from(`data: {"event": "message.delta", "delta": "plain"}\n\n${frame}`);
    for (let cut = 1; cut < bytes.length; cut++) {
      const decoder = new SseDecoder(limits, 'ep', key);
      const items = [...decoder.push(bytes.subarray(0, cut)), ...decoder.push(bytes.subarray(cut))];
      expect(items, `cut at ${cut}`).toHaveLength(2);
      expect(JSON.stringify(items), `cut at ${cut}`).not.toContain(key);
    }
  });

  it('a stream that never holds the key is decoded unchanged', () => {
    const decoder = new SseDecoder(limits, 'ep', key);
    const items = decoder.push(Buffer.from('data: {"event": "message.delta", "delta": "a \\n b \\u00e9"}\n\n'));
    expect(items).toEqual([{ event: 'message.delta', data: { event: 'message.delta', delta: 'a \n b é' } }]);
  });
});
