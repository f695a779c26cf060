/**
 * The SSE decoder as it was before issue #17 part 4 (strict UTF-8 text fed to eventsource-parser,
 * with its own key watch), its frame byte count now walked byte by byte. Kept only as the
 * reference of the differential tests (test/transport/sse-differential.test.ts): the decoder in
 * src/ must give the same items, the same faults and the same redaction for any bytes split anywhere.
 */
import { createParser, type EventSourceMessage, type EventSourceParser } from 'eventsource-parser';
import { HermesFailure } from '../../src/failures.js';
import { MAX_PROVIDER_JSON_DEPTH, mayHold, parseProviderJson, type ProviderJsonRefused } from '../../src/transport/provider-json.js';
import { redactText } from '../../src/internal/secret.js';
import type { SseDecoderLimits } from '../../src/transport/sse.js';
import type { HermesSseEvent } from '../../src/types.js';
import { StrictUtf8Decoder, type InvalidUtf8 } from '../../src/transport/utf8.js';

/** The reference's own `[DONE]` marker (compared by shape, not identity). */
const SSE_DONE = Object.freeze({ kind: 'done' as const });

type SseItem = HermesSseEvent | typeof SSE_DONE;

const LF = 0x0a;
const CR = 0x0d;

/** The longest JSON escape that can spell one of a key's characters (`\u0073`). */
const ESCAPE_LENGTH = 6;

/**
 * Turns Hermes SSE bytes into typed events. Bytes are decoded as streaming, strict UTF-8
 * and parsed by eventsource-parser; frame and stream sizes are counted in bytes before
 * anything is buffered, so a line that never ends cannot grow memory past the frame limit.
 * Frames are `data:`-only JSON typed by their `event` field; an `event:` line, when a
 * server sends one, takes precedence. `[DONE]` marks the end of the stream. Comments
 * (`: keepalive`, `: stream closed`) are not events.
 */
export class ReferenceSseDecoder {
  readonly #limits: SseDecoderLimits;
  readonly #endpointId: string;
  readonly #secret: string | undefined;
  readonly #utf8 = new StrictUtf8Decoder();
  readonly #parser: EventSourceParser;
  #items: SseItem[] = [];
  #bytesRead = 0;
  #pendingFrameBytes = 0;
  #lastByte = -1;
  #swallowLeadingLf = false;
  #failure: HermesFailure | undefined;
  /**
   * Set once the stream's text could hold the key (as it is, or spelled by an escape): from then
   * on every frame is checked and redacted. Until then no frame can hold it, so none is searched:
   * one search per network read instead of one per frame.
   */
  #secretMayAppear = false;
  /** The end of the previous read's text, so that a key or escape split between reads is still seen. */
  #tail = '';

  /** `secret`, the endpoint's key, is redacted from every event (name, id, data) before it leaves the decoder. */
  constructor(limits: SseDecoderLimits, endpointId: string, secret?: string) {
    this.#limits = limits;
    this.#endpointId = endpointId;
    this.#secret = secret;
    this.#parser = createParser({ onEvent: (message) => this.#onMessage(message) });
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
    let bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const room = this.#limits.maxStreamBytes - this.#bytesRead;
    this.#bytesRead += chunk.length;
    if (chunk.length > room) {
      fault = this.#invalid(`an event stream larger than ${this.#limits.maxStreamBytes} bytes`);
      bytes = bytes.subarray(0, room);
    }
    const withinFrameLimit = this.#trackFrameBytes(bytes);
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
    // eventsource-parser holds a final CR back in case LF follows. Completing it as CRLF now, and
    // dropping that LF if it does come, delivers a CR-terminated frame without waiting for more bytes.
    if (this.#swallowLeadingLf && text.startsWith('\n')) text = text.slice(1);
    this.#swallowLeadingLf = text.endsWith('\r');
    this.#watchForSecret(text);
    this.#parser.feed(this.#swallowLeadingLf ? `${text}\n` : text);
    // A bad frame inside the text comes before a fault in the bytes that follow it.
    this.#failure ??= fault;
    const items = this.#items;
    this.#items = [];
    if (this.#failure && items.length === 0) throw this.#failure;
    return items;
  }

  /**
   * Measures every frame in the chunk, complete or not, against the frame limit, one byte at a time
   * (the decoder searches for frame ends instead): a frame ends at the second of two line
   * terminators in a row, CR LF being one terminator; within a chunk a terminator that ended a frame
   * starts no pair, while the last byte of the previous chunk always can. Returns how many bytes of
   * the chunk come before the first frame that passes the limit: all of them when none does.
   */
  #trackFrameBytes(buffer: Buffer): number {
    if (buffer.length === 0) return 0;
    let previous = this.#lastByte;
    this.#lastByte = buffer[buffer.length - 1] as number;
    let frameStart = 0;
    for (let index = 0; index < buffer.length; index++) {
      const byte = buffer[index] as number;
      const endsFrame = isTerminator(previous) && isTerminator(byte) && !(previous === CR && byte === LF);
      if (endsFrame && index === 0) {
        // The frame ended with the previous chunk's last byte: this one is not counted.
        this.#pendingFrameBytes = 0;
        frameStart = 1;
      } else if (endsFrame) {
        if (this.#pendingFrameBytes + 1 > this.#limits.maxFrameBytes) return frameStart;
        this.#pendingFrameBytes = 0;
        frameStart = index + 1;
      } else this.#pendingFrameBytes++;
      previous = endsFrame ? -1 : byte;
    }
    return this.#pendingFrameBytes > this.#limits.maxFrameBytes ? frameStart : buffer.length;
  }

  #watchForSecret(text: string): void {
    const secret = this.#secret;
    if (secret === undefined || this.#secretMayAppear) return;
    const seen = this.#tail + text;
    this.#secretMayAppear = mayHold(seen, secret);
    // Enough to hold all but the last character of a key, or of a six-character escape.
    this.#tail = seen.slice(-Math.max(secret.length, ESCAPE_LENGTH));
  }

  #onMessage(message: EventSourceMessage): void {
    if (this.#failure) return;
    if (message.data.trim() === '[DONE]') {
      this.#items.push(SSE_DONE);
      return;
    }
    let data: unknown;
    try {
      data = parseProviderJson(message.data, this.#secretMayAppear ? this.#secret : undefined);
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
    const name = message.event ?? record.event ?? record.type;
    if (typeof name !== 'string' || name === '') {
      this.#failure = this.#invalid('an SSE frame without an event name');
      return;
    }
    const secret = this.#secretMayAppear ? this.#secret : undefined;
    const event: HermesSseEvent = { event: secret === undefined ? name : redactText(name, secret), data: record };
    if (message.id !== undefined) event.id = secret === undefined ? message.id : redactText(message.id, secret);
    this.#items.push(event);
  }

  #invalid(what: string): HermesFailure {
    return new HermesFailure('invalid_response', `Hermes endpoint \`${this.#endpointId}\` sent ${what}`, { effect: 'known', remoteStatus: 200 });
  }
}

function isTerminator(byte: number | undefined): boolean {
  return byte === LF || byte === CR;
}
