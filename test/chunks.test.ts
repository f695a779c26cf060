import { describe, expect, it } from 'vitest';
import { OpenCalls } from '../src/transport/call-scope.js';
import { ChunkPublisher, chunkKindOf } from '../src/chunks.js';
import { HermesFailure } from '../src/failures.js';
import type { AipStreamChunk, HermesSseEvent } from '../src/types.js';
import { deferred } from './helpers/deferred.js';

const TERMINAL = new Set(['run.completed', 'run.failed', 'run.cancelled']);

function ev(name: string, data: Record<string, unknown> = {}): HermesSseEvent {
  return { event: name, data: { event: name, run_id: 'run_1', ...data } };
}

function recorder(): { chunks: AipStreamChunk[]; publisher: ChunkPublisher } {
  const chunks: AipStreamChunk[] = [];
  return { chunks, publisher: new ChunkPublisher('act_1', (chunk) => void chunks.push(chunk)) };
}

async function publishAll(publisher: ChunkPublisher, events: HermesSseEvent[]): Promise<void> {
  for (const event of events) await publisher.publishEvent(event, TERMINAL.has(event.event));
}

/** Lets every pending microtask and one macrotask run. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('chunk kinds (API doc mapping)', () => {
  it.each([
    ['message.delta', false, 'data'],
    ['tool.started', false, 'tool'],
    ['tool.completed', false, 'tool'],
    ['tool.progress', false, 'tool'],
    ['approval.request', false, 'pending_approval'],
    ['reasoning.available', false, 'thought'],
    ['approval.responded', false, 'data'],
    ['run.started', false, 'data'],
    ['something.new', false, 'data'],
    ['run.failed', true, 'error'],
    ['run.completed', true, 'done'],
    ['run.cancelled', true, 'done'],
  ] as const)('%s (terminal=%s) → %s', (name, terminal, kind) => {
    expect(chunkKindOf(name, terminal)).toBe(kind);
  });

  it('publishes each event with its kind, data {hermes_sse: event} and action id', async () => {
    const { chunks, publisher } = recorder();
    const events = [
      ev('message.delta', { delta: 'Hel' }),
      ev('tool.started', { tool: 'terminal', preview: 'ls' }),
      ev('approval.request', { command: 'rm -rf x' }),
      ev('approval.responded', { choice: 'once' }),
      ev('tool.completed', { tool: 'terminal' }),
      ev('reasoning.available', { text: 'thinking' }),
      ev('run.completed', { output: 'All done' }),
    ];
    await publishAll(publisher, events);
    expect(chunks.map((c) => c.kind)).toEqual(['data', 'tool', 'pending_approval', 'data', 'tool', 'thought', 'done']);
    expect(chunks.map((c) => c.sequence)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    chunks.forEach((chunk, i) => {
      expect(chunk.action_id).toBe('act_1');
      expect(chunk.data).toStrictEqual({ hermes_sse: events[i] });
    });
    expect(publisher.finished).toBe(true);
  });

  it('ends with an error chunk on run.failed', async () => {
    const { chunks, publisher } = recorder();
    await publishAll(publisher, [ev('message.delta', { delta: 'x' }), ev('run.failed', { error: 'boom' })]);
    expect(chunks.map((c) => [c.sequence, c.kind])).toEqual([
      [0, 'data'],
      [1, 'error'],
    ]);
    expect(publisher.finished).toBe(true);
  });

  it('ends with a done chunk on run.cancelled', async () => {
    const { chunks, publisher } = recorder();
    await publishAll(publisher, [ev('run.cancelled')]);
    expect(chunks).toStrictEqual([{ action_id: 'act_1', sequence: 0, kind: 'done', data: { hermes_sse: ev('run.cancelled') } }]);
  });
});

describe('part text', () => {
  it('is the delta of message.delta, the text of reasoning.available and the output of run.completed', async () => {
    const { chunks, publisher } = recorder();
    await publishAll(publisher, [
      ev('message.delta', { delta: 'Hello ' }),
      ev('reasoning.available', { text: 'cleanup done' }),
      ev('run.completed', { output: 'Removed ./build.' }),
    ]);
    expect(chunks.map((c) => c.part)).toStrictEqual([
      { type: 'text', text: 'Hello ' },
      { type: 'text', text: 'cleanup done' },
      { type: 'text', text: 'Removed ./build.' },
    ]);
  });

  it('is absent when the event has no text (or only empty or non-string text)', async () => {
    const { chunks, publisher } = recorder();
    await publishAll(publisher, [
      ev('tool.started', { tool: 'terminal', preview: 'ls' }),
      ev('message.delta', { delta: '' }),
      ev('message.delta', { delta: 42 }),
      ev('run.cancelled'),
    ]);
    expect(chunks).toHaveLength(4);
    for (const chunk of chunks) expect(chunk).not.toHaveProperty('part');
  });
});

describe('sequence and the single final chunk', () => {
  it('numbers chunks 0.. without gaps over a long stream', async () => {
    const { chunks, publisher } = recorder();
    const events = Array.from({ length: 50 }, (_, i) => ev(i % 3 === 0 ? 'tool.started' : 'message.delta', { delta: String(i) }));
    await publishAll(publisher, [...events, ev('run.completed')]);
    expect(chunks.map((c) => c.sequence)).toEqual(Array.from({ length: 51 }, (_, i) => i));
  });

  it('publishes nothing after a terminal event, including finishWithError', async () => {
    const { chunks, publisher } = recorder();
    await publishAll(publisher, [ev('message.delta', { delta: 'a' }), ev('run.completed')]);
    await publisher.publishEvent(ev('message.delta', { delta: 'late' }), false);
    await publisher.publishEvent(ev('run.failed'), true);
    await publisher.finishWithError('connector.hermes_agent.stream_incomplete', 'late error');
    expect(chunks.map((c) => c.kind)).toEqual(['data', 'done']);
  });

  it('finishWithError sends one error chunk with code and message, however often it is called', async () => {
    const { chunks, publisher } = recorder();
    await publishAll(publisher, [ev('message.delta', { delta: 'a' })]);
    expect(publisher.finished).toBe(false);
    await publisher.finishWithError('connector.hermes_agent.stream_truncated', 'Stopped after max_events');
    await publisher.finishWithError('connector.hermes_agent.transport', 'second');
    expect(chunks).toStrictEqual([
      { action_id: 'act_1', sequence: 0, kind: 'data', data: { hermes_sse: ev('message.delta', { delta: 'a' }) }, part: { type: 'text', text: 'a' } },
      { action_id: 'act_1', sequence: 1, kind: 'error', data: { code: 'connector.hermes_agent.stream_truncated', message: 'Stopped after max_events' } },
    ]);
    expect(publisher.finished).toBe(true);
  });

  it('finishWithError on an empty stream sends one error chunk with sequence 0', async () => {
    const { chunks, publisher } = recorder();
    await publisher.finishWithError('connector.hermes_agent.not_found', 'gone');
    expect(chunks.map((c) => [c.sequence, c.kind])).toEqual([[0, 'error']]);
  });

  it('without onChunk publishes nowhere but still finishes exactly once', async () => {
    const publisher = new ChunkPublisher('act_1', undefined);
    await publisher.publishEvent(ev('message.delta', { delta: 'a' }), false);
    expect(publisher.finished).toBe(false);
    await publisher.publishEvent(ev('run.completed'), true);
    expect(publisher.finished).toBe(true);
    await expect(publisher.finishWithError('c', 'm')).resolves.toBeUndefined();
  });
});

describe('back-pressure', () => {
  it('publishEvent resolves only after the async onChunk resolved', async () => {
    const gate = deferred();
    const publisher = new ChunkPublisher('act_1', () => gate.promise);
    let resolved = false;
    const publishing = Promise.resolve(publisher.publishEvent(ev('message.delta', { delta: 'a' }), false)).then(() => {
      resolved = true;
    });
    await settle();
    expect(resolved).toBe(false);
    gate.resolve();
    await publishing;
    expect(resolved).toBe(true);
  });

  it('a reader that awaits each publish never calls onChunk before the previous promise resolved', async () => {
    const gates: Array<ReturnType<typeof deferred>> = [];
    const seen: number[] = [];
    const publisher = new ChunkPublisher('act_1', (chunk) => {
      seen.push(chunk.sequence);
      const gate = deferred();
      gates.push(gate);
      return gate.promise;
    });
    const events = [ev('message.delta', { delta: 'a' }), ev('tool.started'), ev('message.delta', { delta: 'b' }), ev('run.completed')];
    const reading = publishAll(publisher, events);

    for (let i = 0; i < events.length; i += 1) {
      await settle();
      expect(seen).toEqual(Array.from({ length: i + 1 }, (_, j) => j));
      await settle();
      // Still waiting on chunk i: nothing more was handed over.
      expect(seen).toHaveLength(i + 1);
      gates[i]?.resolve();
    }
    await reading;
    expect(seen).toEqual([0, 1, 2, 3]);
  });
});

describe('a failing onChunk', () => {
  it.each([
    [
      'throws synchronously',
      () => {
        throw new Error('host publisher down');
      },
    ],
    ['rejects', () => Promise.reject(new Error('host publisher down'))],
  ])('that %s surfaces as HermesFailure stream_publication', async (_name, onChunk) => {
    const publisher = new ChunkPublisher('act_1', onChunk);
    const error = await Promise.resolve(publisher.publishEvent(ev('message.delta', { delta: 'a' }), false)).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(HermesFailure);
    expect((error as HermesFailure).code).toBe('stream_publication');
    expect((error as HermesFailure).effect).toBe('known');
    expect((error as HermesFailure).message).not.toContain('host publisher down');
  });

  it('a failing final chunk still marks the stream finished; finishWithError never throws', async () => {
    let calls = 0;
    const publisher = new ChunkPublisher('act_1', () => {
      calls += 1;
      throw new Error('down');
    });
    await expect(publisher.publishEvent(ev('run.completed'), true)).rejects.toBeInstanceOf(HermesFailure);
    expect(publisher.finished).toBe(true);
    await expect(publisher.finishWithError('c', 'm')).resolves.toBeUndefined();
    expect(calls).toBe(1);
  });

  it('after a failed non-final chunk, finishWithError tries once more and swallows the failure', async () => {
    let calls = 0;
    const publisher = new ChunkPublisher('act_1', () => {
      calls += 1;
      throw new Error('down');
    });
    await expect(publisher.publishEvent(ev('message.delta', { delta: 'a' }), false)).rejects.toMatchObject({ code: 'stream_publication' });
    await expect(publisher.finishWithError('c', 'm')).resolves.toBeUndefined();
    await expect(publisher.finishWithError('c', 'm')).resolves.toBeUndefined();
    expect(calls).toBe(2);
    expect(publisher.finished).toBe(true);
  });
});

describe('a host callback that never settles', () => {
  it('finishWithError waits for the final chunk only until the bounds end the invocation', async () => {
    const seen: AipStreamChunk[] = [];
    const publisher = new ChunkPublisher('act_1', (chunk) => (seen.push(chunk), new Promise<void>(() => undefined)), {
      signal: undefined,
      openCalls: new OpenCalls(),
      deadline: Date.now() + 50,
      now: Date.now,
    });
    await publisher.finishWithError('connector.hermes_agent.not_found', 'gone');
    expect(seen.map((chunk) => chunk.kind)).toEqual(['error']);
    expect(publisher.finished).toBe(true);
  });
});
