const LF = 0x0a;
const CR = 0x0d;
/** Two line terminators in a row end a frame: LF LF, CR CR, or LF CR (which also covers CRLF CRLF). Each is two bytes. */
const FRAME_ENDS = [Buffer.from('\n\n'), Buffer.from('\r\r'), Buffer.from('\n\r')];
const LF_LF = FRAME_ENDS[0] as Buffer;

/**
 * Counts the bytes of the SSE frame being read, across network reads, so that a frame (or a line
 * that never ends) is refused at the limit before its bytes reach the parser, which would buffer
 * them whole. Frames are delimited on the raw bytes, by the same line terminators the parser uses.
 */
export class SseFrameBytes {
  readonly #maxFrameBytes: number;
  #pendingFrameBytes = 0;
  #lastByte = -1;

  constructor(maxFrameBytes: number) {
    this.#maxFrameBytes = maxFrameBytes;
  }

  /**
   * Measures every frame in the chunk, complete or not, against the frame limit. Returns how many
   * bytes of the chunk come before the first frame that passes it: all of them when none does.
   */
  withinLimit(buffer: Buffer): number {
    if (buffer.length === 0) return 0;
    let start = 0;
    if (endsFrameAcrossChunks(this.#lastByte, buffer[0])) {
      this.#pendingFrameBytes = 0;
      start = 1;
    }
    this.#lastByte = buffer[buffer.length - 1] ?? -1;
    if (buffer.length <= this.#maxFrameBytes) {
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
    return frameBytes > this.#maxFrameBytes;
  }
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
 * end), as SseFrameBytes' loop would. Frame ends lie inside runs of line terminators, so only
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
