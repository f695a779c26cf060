import { createParser, type EventSourceMessage, type EventSourceParser } from 'eventsource-parser';
import { HermesFailure } from '../failures.js';
import { MAX_PROVIDER_JSON_DEPTH, mayHold, parseProviderJson, type ProviderJsonRefused } from './provider-json.js';
import { redactText } from '../internal/secret.js';
import type { HermesSseEvent } from '../types.js';
import { SseFrameBytes } from './sse-frame-bytes.js';
import { SplitKeyGuard } from './split-key.js';
import { StrictUtf8Decoder, type InvalidUtf8 } from './utf8.js';

/** The `[DONE]` marker among a push's items; every other item is an event as decoded (no wrapper per event). */
const SSE_DONE: SseDone = Object.freeze({ kind: 'done' });

export interface SseDone {
  readonly kind: 'done';
}

export type SseItem = HermesSseEvent | SseDone;

export function isSseDone(item: SseItem): item is SseDone {
  return item === SSE_DONE;
}

export interface SseDecoderLimits {
  maxFrameBytes: number;
  maxStreamBytes: number;
}

const CR = 0x0d;
const LF = 0x0a;
const OPEN_BRACE = 0x7b;

/** The longest JSON escape that can spell one of a key's characters (`\u0073`). */
const ESCAPE_LENGTH = 6;

/**
 * Turns Hermes SSE bytes into typed events. The SSE lines and fields are eventsource-parser's
 * (`createParser`); around it, what the parser does not do: stream and frame sizes counted in bytes
 * before anything reaches it (it buffers an unfinished line whole, so a line that never ends is
 * refused at the frame limit by SseFrameBytes), strict UTF-8 (a bad byte is a typed fault, never
 * U+FFFD), the key's redaction and the hold-back of a key split across deltas (SplitKeyGuard).
 * Frames are `data:`-only JSON typed by their `event` field; an `event:` line, when a server sends
 * one, takes precedence. `[DONE]` marks the end of the stream. Comments (`: keepalive`,
 * `: stream closed`) are not events.
 */
export class SseDecoder {
  readonly #limits: SseDecoderLimits;
  readonly #endpointId: string;
  readonly #secret: string | undefined;
  readonly #utf8 = new StrictUtf8Decoder();
  readonly #frameBytes: SseFrameBytes;
  /** Made with the stream's first text: a parser holds about 1 KiB, and a stream may stay idle a long time before its first byte. */
  #parser: EventSourceParser | undefined;
  /** With a key: holds back deltas that may be the start of the key spelled across several of them. */
  readonly #splitKey: SplitKeyGuard | undefined;
  #items: SseItem[] = [];
  #bytesRead = 0;
  #failure: HermesFailure | undefined;
  /**
   * Set once the stream's text could hold the key (as it is, or spelled by an escape): from then
   * on every frame is checked and redacted. Until then no frame can hold it, so none is searched:
   * one search per network read instead of one per frame.
   */
  #secretMayAppear = false;
  /** The end of the previous reads' text, so that a key or escape split between reads is still seen. */
  #tail = '';
  /** The previous read's text ended with CR, fed to the parser as CRLF: an LF starting this read is that CRLF's. */
  #afterCr = false;
  /**
   * Hermes repeats the run id and the event name in every frame: each event keeps the first copy
   * of those strings rather than its own (about 90 of the 210 bytes a delta event keeps on the
   * heap). The values are the same strings, only not copies.
   */
  #runId: string | undefined;
  #eventName: string | undefined;

  /** `secret`, the endpoint's key, is redacted from every event (name, id, data) before it leaves the decoder. */
  constructor(limits: SseDecoderLimits, endpointId: string, secret?: string) {
    this.#limits = limits;
    this.#endpointId = endpointId;
    this.#secret = secret;
    this.#frameBytes = new SseFrameBytes(limits.maxFrameBytes);
    this.#splitKey = secret === undefined ? undefined : new SplitKeyGuard(secret);
  }

  get bytesRead(): number {
    return this.#bytesRead;
  }

  /**
   * The fault that stopped decoding, once one was met. Decoding is positional: push() still returns
   * the items completed before the fault in its chunk, and a reader that stops at one of them (a
   * terminal event) never meets the fault, however the network cut the bytes.
   */
  get failure(): HermesFailure | undefined {
    return this.#failure;
  }

  /**
   * Feeds one network chunk; returns the items it completed before any fault, in order. A fault
   * (`invalid_response`) is thrown at once when no item precedes it, else by the next push();
   * check `failure` after the items to stop at once.
   */
  push(chunk: Uint8Array): SseItem[] {
    if (this.#failure) throw this.#failure;
    let fault: HermesFailure | undefined;
    let bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const room = this.#limits.maxStreamBytes - this.#bytesRead;
    this.#bytesRead += chunk.length;
    if (chunk.length > room) {
      fault = this.#invalid(`an event stream larger than ${this.#limits.maxStreamBytes} bytes`);
      bytes = bytes.subarray(0, room);
    }
    const withinFrameLimit = this.#frameBytes.withinLimit(bytes);
    if (withinFrameLimit < bytes.length) {
      fault = this.#invalid(`an SSE frame larger than ${this.#limits.maxFrameBytes} bytes`);
      bytes = bytes.subarray(0, withinFrameLimit);
    }
    let text: string;
    try {
      text = this.#utf8.decode(bytes);
    } catch (error) {
      fault = this.#invalid('an event stream that is not valid UTF-8');
      text = (error as InvalidUtf8).validText;
    }
    this.#watchForSecret(text);
    this.#feed(text);
    // A bad frame inside the text comes before a fault in the bytes that follow it.
    this.#failure ??= fault;
    const decoded = this.#items;
    this.#items = [];
    const items = this.#splitKey ? this.#splitKey.sift(decoded, this.#failure !== undefined) : decoded;
    if (this.#failure && items.length === 0) throw this.#failure;
    return items;
  }

  /**
   * The stream's end: the events still held back (see SplitKeyGuard), which no delta can complete
   * any more. Call once the body has ended or broken.
   */
  finish(): SseItem[] {
    const held: SseItem[] = [];
    this.#splitKey?.release(held);
    return held;
  }

  /**
   * The parser holds a final CR back until it sees whether LF follows. A read that ends with CR is
   * fed as ending with CRLF, and the LF that may start the next read is dropped: a CR-terminated
   * frame is delivered by the read that completes it, without waiting for more bytes.
   */
  #feed(text: string): void {
    if (text === '') return;
    if (this.#afterCr && text.charCodeAt(0) === LF) text = text.slice(1);
    this.#afterCr = text.charCodeAt(text.length - 1) === CR;
    this.#parser ??= this.#newParser();
    this.#parser.feed(this.#afterCr ? `${text}\n` : text);
  }

  #newParser(): EventSourceParser {
    const parser = createParser({ onEvent: (message) => this.#onMessage(message) });
    // The parser drops "ï»¿" (a byte order mark decoded as Latin-1) from its first feed; the UTF-8
    // decoder drops the real one, and text that starts with those three characters is left as sent.
    parser.feed('');
    return parser;
  }

  #watchForSecret(text: string): void {
    const secret = this.#secret;
    if (secret === undefined || this.#secretMayAppear || text === '') return;
    // Enough to hold all but the last character of a key, or of a six-character escape.
    const keep = Math.max(secret.length, ESCAPE_LENGTH);
    // The read's own text, and apart (so that the whole text is never copied) what spans the previous one's end.
    this.#secretMayAppear = (this.#tail !== '' && mayHold(this.#tail + text.slice(0, keep - 1), secret)) || mayHold(text, secret);
    this.#tail = text.length >= keep ? text.slice(-keep) : (this.#tail + text).slice(-keep);
  }

  #onMessage({ data: text, event: eventType, id }: EventSourceMessage): void {
    // The parser goes on through the rest of the read; the events after a bad frame are not the stream's.
    if (this.#failure) return;
    if (text.charCodeAt(0) !== OPEN_BRACE && text.trim() === '[DONE]') {
      this.#items.push(SSE_DONE);
      return;
    }
    const secret = this.#secretMayAppear ? this.#secret : undefined;
    let data: unknown;
    try {
      data = parseProviderJson(text, secret);
    } catch (error) {
      const tooDeep = (error as ProviderJsonRefused).reason === 'too_deep';
      this.#failure = this.#invalid(
        tooDeep ? `an SSE frame whose data is nested more than ${MAX_PROVIDER_JSON_DEPTH} levels deep` : 'an SSE frame whose data is not JSON',
      );
      return;
    }
    if (data === null || typeof data !== 'object' || Array.isArray(data)) {
      this.#failure = this.#invalid('an SSE frame whose data is not a JSON object');
      return;
    }
    const record = data as Record<string, unknown>;
    this.#shareRepeatedStrings(record);
    const name = eventType ?? record.event ?? record.type;
    if (typeof name !== 'string' || name === '') {
      this.#failure = this.#invalid('an SSE frame without an event name');
      return;
    }
    const event: HermesSseEvent = { event: secret === undefined ? name : redactText(name, secret), data: record };
    if (id !== undefined) event.id = secret === undefined ? id : redactText(id, secret);
    this.#items.push(event);
  }

  /** `record` is a fresh JSON.parse object: a member it reads is its own unless Object.prototype holds one (then it is left alone). */
  #shareRepeatedStrings(record: Record<string, unknown>): void {
    const runId = record.run_id;
    if (typeof runId === 'string' && !('run_id' in Object.prototype)) {
      if (runId === this.#runId) record.run_id = this.#runId;
      else this.#runId = runId;
    }
    const name = record.event;
    if (typeof name === 'string' && !('event' in Object.prototype)) {
      if (name === this.#eventName) record.event = this.#eventName;
      else this.#eventName = name;
    }
  }

  #invalid(what: string): HermesFailure {
    return new HermesFailure('invalid_response', `Hermes endpoint \`${this.#endpointId}\` sent ${what}`, { effect: 'known', remoteStatus: 200 });
  }
}
