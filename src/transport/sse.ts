import { HermesFailure } from '../failures.js';
import { MAX_PROVIDER_JSON_DEPTH, mayHold, parseProviderJson, type ProviderJsonRefused } from './provider-json.js';
import { redactText } from '../internal/secret.js';
import type { HermesSseEvent } from '../types.js';
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

const LF = 0x0a;
const CR = 0x0d;
const SPACE = 0x20;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
/** Two line terminators in a row end a frame: LF LF, CR CR, or LF CR (which also covers CRLF CRLF). Each is two bytes. */
const FRAME_ENDS = [Buffer.from('\n\n'), Buffer.from('\r\r'), Buffer.from('\n\r')];
const LF_LF = FRAME_ENDS[0] as Buffer;

/** The longest JSON escape that can spell one of a key's characters (`\u0073`). */
const ESCAPE_LENGTH = 6;

/**
 * Turns Hermes SSE bytes into typed events. Each network read is decoded as streaming, strict
 * UTF-8 into one string, which the decoder splits into lines itself, by the SSE specification's
 * rules as eventsource-parser applies them (CR, LF or CRLF; `data:` lines joined with LF;
 * `event:`; `id:` without NUL; comments and other fields ignored): a Hermes frame costs one slice
 * of that string and no message object, and only a line cut by the read is ever joined. Frame and
 * stream sizes are counted in bytes before anything is buffered, so a line that never ends cannot
 * grow memory past the frame limit. Frames are `data:`-only JSON typed by their `event` field; an
 * `event:` line, when a server sends one, takes precedence. `[DONE]` marks the end of the
 * stream. Comments (`: keepalive`, `: stream closed`) are not events.
 */
export class SseDecoder {
  readonly #limits: SseDecoderLimits;
  readonly #endpointId: string;
  readonly #secret: string | undefined;
  readonly #utf8 = new StrictUtf8Decoder();
  /** With a key: holds back deltas that may be the start of the key spelled across several of them. */
  readonly #splitKey: SplitKeyGuard | undefined;
  #items: SseItem[] = [];
  #bytesRead = 0;
  #pendingFrameBytes = 0;
  #lastByte = -1;
  #failure: HermesFailure | undefined;
  /**
   * Set once the stream's text could hold the key (as it is, or spelled by an escape): from then
   * on every frame is checked and redacted. Until then no frame can hold it, so none is searched:
   * one search per network read instead of one per frame.
   */
  #secretMayAppear = false;
  /** The end of the previous reads' text, so that a key or escape split between reads is still seen. */
  #tail = '';
  /** The start of a line whose terminator has not arrived yet. */
  #partial = '';
  /** The previous read ended with CR: an LF at the start of this one completes that CRLF. */
  #afterCr = false;
  // The frame being read: its `data:` lines so far, `event:` and `id:`.
  #data = '';
  #dataLines = 0;
  #eventType: string | undefined;
  #id: string | undefined;
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
    this.#watchForSecret(text);
    this.#parse(text);
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
   * Splits the text into lines and applies each, stopping at a bad frame. The unfinished last line
   * is kept for the next read; only the first line of a read is ever joined with it.
   */
  #parse(text: string): void {
    const length = text.length;
    let position = 0;
    if (this.#afterCr && length > 0) {
      this.#afterCr = false;
      if (text.charCodeAt(0) === LF) position = 1;
    }
    // Most reads hold no CR at all: then only LFs are searched for.
    let nextCr = text.indexOf('\r', position);
    let nextLf = text.indexOf('\n', position);
    while (this.#failure === undefined) {
      if (nextLf !== -1 && nextLf < position) nextLf = text.indexOf('\n', position);
      if (nextCr !== -1 && nextCr < position) nextCr = text.indexOf('\r', position);
      const end = nextCr === -1 ? nextLf : nextLf === -1 || nextCr < nextLf ? nextCr : nextLf;
      if (end === -1) break;
      if (end === nextLf && text.charCodeAt(end + 1) === LF && this.#dataLines === 0 && this.#partial === '' && isDataLine(text, position)) {
        // The Hermes frame, `data: <json>` and a blank line, in one step: what #line would do for both lines.
        this.#onMessage(text.slice(text.charCodeAt(position + 5) === SPACE ? position + 6 : position + 5, end), this.#eventType, this.#id);
        this.#eventType = undefined;
        this.#id = undefined;
        position = end + 2;
        continue;
      }
      if (this.#partial === '') this.#line(text, position, end);
      else {
        const line = this.#partial + text.slice(position, end);
        this.#partial = '';
        this.#line(line, 0, line.length);
      }
      position = end + 1;
      if (end === nextCr) {
        if (position === length) this.#afterCr = true;
        else if (text.charCodeAt(position) === LF) position++;
      }
    }
    if (position < length && this.#failure === undefined) this.#partial += position === 0 ? text : text.slice(position);
  }

  /** One line, without its terminator: a field, a comment, or (empty) the end of a frame. */
  #line(text: string, start: number, end: number): void {
    if (start === end) {
      if (this.#dataLines > 0) this.#onMessage(this.#data, this.#eventType, this.#id);
      this.#data = '';
      this.#dataLines = 0;
      this.#eventType = undefined;
      this.#id = undefined;
      return;
    }
    if (isDataLine(text, start)) {
      // data: (past the line's end is its terminator or nothing, never a space)
      this.#addData(text.slice(text.charCodeAt(start + 5) === SPACE ? start + 6 : start + 5, end));
      return;
    }
    if (text.charCodeAt(start) === COLON) return; // a comment
    const line = text.slice(start, end);
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(line.charCodeAt(colon + 1) === SPACE ? colon + 2 : colon + 1);
    if (field === 'data') this.#addData(value);
    else if (field === 'event') this.#eventType = value === '' ? undefined : value;
    else if (field === 'id' && !value.includes('\0')) this.#id = value;
  }

  #addData(value: string): void {
    this.#data = this.#dataLines === 0 ? value : `${this.#data}\n${value}`;
    this.#dataLines++;
  }

  /**
   * Measures every frame in the chunk, complete or not, against the frame limit. Returns how many
   * bytes of the chunk come before the first frame that passes it: all of them when none does.
   */
  #trackFrameBytes(buffer: Buffer): number {
    if (buffer.length === 0) return 0;
    let start = 0;
    if (endsFrameAcrossChunks(this.#lastByte, buffer[0])) {
      this.#pendingFrameBytes = 0;
      start = 1;
    }
    this.#lastByte = buffer[buffer.length - 1] ?? -1;
    if (buffer.length <= this.#limits.maxFrameBytes) {
      // A frame that starts and ends inside this chunk is no longer than the chunk, so within the
      // limit: only the frame carried in and the one carried out need measuring. One search per
      // chunk instead of one per frame.
      // Most chunks hold no CR: then LF LF is the only frame end to look for (one memchr instead of two pattern searches).
      const crs = buffer.indexOf(CR, start) !== -1;
      const first = firstFrameEnd(buffer, start, crs);
      if (first !== -1) {
        if (this.#tooLarge(this.#pendingFrameBytes + first - start)) return 0;
        this.#pendingFrameBytes = 0;
        start = lastFrameEnd(buffer, first, crs);
      }
      return this.#carryOut(buffer, start);
    }
    const next = FRAME_ENDS.map((pattern) => buffer.indexOf(pattern, start));
    for (;;) {
      let end = Infinity;
      for (let i = 0; i < FRAME_ENDS.length; i++) {
        let at = next[i] as number;
        if (at !== -1 && at < start) next[i] = at = buffer.indexOf(FRAME_ENDS[i] as Buffer, start);
        if (at !== -1) end = Math.min(end, at + 2);
      }
      if (end === Infinity) break;
      if (this.#tooLarge(this.#pendingFrameBytes + end - start)) return start;
      this.#pendingFrameBytes = 0;
      start = end;
    }
    return this.#carryOut(buffer, start);
  }

  /** Carries the unfinished frame from `start` to the next chunk; the chunk's length, or `start` when that frame is already too large. */
  #carryOut(buffer: Buffer, start: number): number {
    this.#pendingFrameBytes += buffer.length - start;
    return this.#tooLarge(this.#pendingFrameBytes) ? start : buffer.length;
  }

  #tooLarge(frameBytes: number): boolean {
    return frameBytes > this.#limits.maxFrameBytes;
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

  #onMessage(text: string, eventType: string | undefined, id: string | undefined): void {
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

/** Whether the line starting at `start` is a `data:` field. */
function isDataLine(text: string, start: number): boolean {
  return (
    text.charCodeAt(start) === 0x64 &&
    text.charCodeAt(start + 1) === 0x61 &&
    text.charCodeAt(start + 2) === 0x74 &&
    text.charCodeAt(start + 3) === 0x61 &&
    text.charCodeAt(start + 4) === COLON
  );
}

/** The end (index after its two bytes) of the earliest frame end at or after `from`, or -1. */
function firstFrameEnd(buffer: Buffer, from: number, crs: boolean): number {
  if (!crs) {
    const at = buffer.indexOf(LF_LF, from);
    return at === -1 ? -1 : at + 2;
  }
  let end = -1;
  for (const pattern of FRAME_ENDS) {
    const at = buffer.indexOf(pattern, from);
    if (at !== -1 && (end === -1 || at + 2 < end)) end = at + 2;
  }
  return end;
}

/**
 * The end of the last frame end met when searching left to right from `from` (itself a frame
 * end), as #trackFrameBytes' loop would. Frame ends lie inside runs of line terminators, so only
 * the last run that holds one is walked, from its first byte, the way the search meets it.
 */
function lastFrameEnd(buffer: Buffer, from: number, crs: boolean): number {
  let before = buffer.length;
  while (before > from) {
    const lf = buffer.lastIndexOf(LF, before - 1);
    const at = crs ? Math.max(lf, buffer.lastIndexOf(CR, before - 1)) : lf;
    if (at < from) return from;
    let runStart = at;
    while (runStart > from && isTerminator(buffer[runStart - 1])) runStart--;
    let end = -1;
    for (let i = runStart; i < at; ) {
      if (isFrameEnd(buffer[i], buffer[i + 1])) {
        end = i + 2;
        i += 2;
      } else i++;
    }
    if (end !== -1) return end;
    before = runStart;
  }
  return from;
}

/** LF LF, CR CR or LF CR: the pairs FRAME_ENDS lists. */
function isFrameEnd(first: number | undefined, second: number | undefined): boolean {
  return (first === LF && (second === LF || second === CR)) || (first === CR && second === CR);
}

/** A frame end split between chunks: a terminator, then another one (CR then LF is a single CRLF). */
function endsFrameAcrossChunks(previous: number, first: number | undefined): boolean {
  return isTerminator(previous) && isTerminator(first) && !(previous === CR && first === LF);
}

function isTerminator(byte: number | undefined): boolean {
  return byte === LF || byte === CR;
}
