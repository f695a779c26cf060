import { HermesFailure } from './failures.js';
import type { AipMessagePart, AipStreamChunk, AipStreamChunkKind, ExecutionContext, HermesSseEvent } from './types.js';

/**
 * Publishes an invocation's stream chunks in order, awaiting the host's `onChunk` before
 * the reader goes on (back-pressure), and guarantees exactly one final chunk.
 */
export class ChunkPublisher {
  readonly #actionId: string;
  readonly #onChunk: ExecutionContext['onChunk'];
  #sequence = 0;
  #finished = false;

  constructor(actionId: string, onChunk: ExecutionContext['onChunk']) {
    this.#actionId = actionId;
    this.#onChunk = onChunk;
  }

  get finished(): boolean {
    return this.#finished;
  }

  /** Publishes one Hermes event; a terminal one is the final chunk. Throws `stream_publication` if the host's callback fails. */
  async publishEvent(event: HermesSseEvent, terminal: boolean): Promise<void> {
    const kind = chunkKindOf(event.event, terminal);
    const text = partTextOf(event);
    await this.#publish(kind, { hermes_sse: event }, text === undefined ? undefined : { type: 'text', text }, kind === 'done' || kind === 'error');
  }

  /** Ends the stream with an error chunk unless a final chunk was already sent. Never throws. */
  async finishWithError(code: string, message: string): Promise<void> {
    if (this.#finished) return;
    try {
      await this.#publish('error', { code, message }, undefined, true);
    } catch {
      // The host's publisher is already failing; the result still reports the error.
    }
  }

  async #publish(kind: AipStreamChunkKind, data: unknown, part: AipMessagePart | undefined, final: boolean): Promise<void> {
    if (this.#finished) return;
    if (final) this.#finished = true;
    const chunk: AipStreamChunk = { action_id: this.#actionId, sequence: this.#sequence++, kind, data };
    if (part) chunk.part = part;
    if (!this.#onChunk) return;
    try {
      await this.#onChunk(chunk);
    } catch {
      throw new HermesFailure('stream_publication', 'The host stream publisher (onChunk) failed; the stream was closed', { effect: 'known' });
    }
  }
}

const TERMINAL_ERROR_EVENTS = new Set(['run.failed']);

export function chunkKindOf(eventName: string, terminal: boolean): AipStreamChunkKind {
  if (eventName === 'message.delta') return 'data';
  if (eventName.startsWith('tool.')) return 'tool';
  if (eventName === 'approval.request') return 'pending_approval';
  if (eventName === 'reasoning.available') return 'thought';
  if (terminal) return TERMINAL_ERROR_EVENTS.has(eventName) ? 'error' : 'done';
  return 'data';
}

function partTextOf({ data }: HermesSseEvent): string | undefined {
  for (const field of ['delta', 'text', 'output'] as const) {
    const value = data[field];
    if (typeof value === 'string' && value !== '') return value;
  }
  return undefined;
}
