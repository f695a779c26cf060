import { CallScope, type CallScopeOptions } from './transport/call-scope.js';
import { HermesFailure } from './failures.js';
import type { AipMessagePart, AipStreamChunk, AipStreamChunkKind, ExecutionContext, HermesSseEvent } from './types.js';

/** What ends an invocation (deadline, cancellation, the connector's close), and so any wait for the host. */
export type PublicationBounds = Omit<CallScopeOptions, 'timeoutMs'>;

/**
 * Publishes an invocation's stream chunks in order, awaiting the host's `onChunk` before
 * the reader goes on (back-pressure), and guarantees exactly one final chunk.
 */
export class ChunkPublisher {
  readonly #actionId: string;
  readonly #onChunk: ExecutionContext['onChunk'];
  readonly #bounds: PublicationBounds | undefined;
  #sequence = 0;
  #finished = false;

  /** `bounds`, when given, end the wait for the final chunk: a host callback that never settles cannot hold the invocation. */
  constructor(actionId: string, onChunk: ExecutionContext['onChunk'], bounds?: PublicationBounds) {
    this.#actionId = actionId;
    this.#onChunk = onChunk;
    this.#bounds = bounds;
  }

  get finished(): boolean {
    return this.#finished;
  }

  /** How many chunks were handed to the host so far. */
  get sent(): number {
    return this.#sequence;
  }

  /**
   * Publishes one Hermes event; a terminal one is the final chunk. Returns a promise only when
   * the host's callback returned one to wait for, so a stream without `onChunk`, or with a
   * synchronous one, pays no promise or await per event. Rejects with `stream_publication` if the
   * host's callback fails.
   */
  publishEvent(event: HermesSseEvent, terminal: boolean): Promise<void> | undefined {
    if (!this.#onChunk) {
      // Only a terminal event can be final: the others need no kind (one call per event of a long stream).
      this.#count(terminal && isFinalKind(chunkKindOf(event.event, true)));
      return undefined;
    }
    const kind = chunkKindOf(event.event, terminal);
    const final = isFinalKind(kind);
    const text = partTextOf(event);
    return this.#publish(kind, { hermes_sse: event }, text === undefined ? undefined : { type: 'text', text }, final);
  }

  /** Ends the stream with an error chunk unless a final chunk was already sent. Never throws. */
  async finishWithError(code: string, message: string): Promise<void> {
    if (this.#finished) return;
    const published = this.#publish('error', { code, message }, undefined, true);
    if (!published) return;
    const scope = this.#bounds && new CallScope({ ...this.#bounds, timeoutMs: undefined });
    try {
      await (scope ? scope.race(published) : published);
    } catch {
      // The host's publisher failed or did not return in time; the result still reports the error.
    } finally {
      scope?.dispose();
    }
  }

  /** Takes the next sequence number; false once the final chunk went out. */
  #count(final: boolean): boolean {
    if (this.#finished) return false;
    if (final) this.#finished = true;
    this.#sequence++;
    return true;
  }

  #publish(kind: AipStreamChunkKind, data: unknown, part: AipMessagePart | undefined, final: boolean): Promise<void> | undefined {
    const sequence = this.#sequence;
    if (!this.#count(final) || !this.#onChunk) return undefined;
    const chunk: AipStreamChunk = { action_id: this.#actionId, sequence, kind, data };
    if (part) chunk.part = part;
    let pending: void | Promise<void>;
    try {
      pending = this.#onChunk(chunk);
    } catch {
      return Promise.reject(publicationFailure());
    }
    if (!isThenable(pending)) return undefined;
    return Promise.resolve(pending).then(undefined, () => {
      throw publicationFailure();
    });
  }
}

function publicationFailure(): HermesFailure {
  return new HermesFailure('stream_publication', 'The host stream publisher (onChunk) failed; the stream was closed', { effect: 'known' });
}

function isThenable(value: unknown): value is PromiseLike<void> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function';
}

const TERMINAL_ERROR_EVENTS = new Set(['run.failed', 'run.interrupted']);

function isFinalKind(kind: AipStreamChunkKind): boolean {
  return kind === 'done' || kind === 'error';
}

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
