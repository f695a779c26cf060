/**
 * The costliest bodies a peer without the gateway key can send: a well-formed signed action whose input
 * then gets up to 4 MiB of tiny values (the signature covers a placeholder, so it is bad: the reference's
 * `reject.bad_signature`, 401), and the heap peaks of a host run with `--trace-gc`.
 */
import { runAction } from './deployment-fixture.js';
import type { Dispatcher, HostTarget } from './dispatcher.js';

export const MAX_BODY_BYTES = 4 * 1024 * 1024;

/** JSON of about `bytes` bytes that costs the most per byte to parse and canonicalise: millions of tiny values, or a huge object. */
export const COSTLY_FILLERS: Readonly<Record<string, (bytes: number) => string>> = {
  numbers: (bytes) => `[${'0,'.repeat(Math.floor(bytes / 2) - 1)}0]`,
  objects: (bytes) => `[${'{},'.repeat(Math.floor(bytes / 3) - 1)}{}]`,
  floats: (bytes) => `[${'1.5,'.repeat(Math.floor(bytes / 4) - 1)}1.5]`,
  keys: (bytes) => {
    const parts: string[] = [];
    for (let i = 0, size = 2; size < bytes - 16; i++) {
      const part = `"${i.toString(36)}":0`;
      parts.push(part);
      size += part.length + 1;
    }
    return `{${parts.join(',')}}`;
  },
};

const PLACEHOLDER = '"@@filler@@"';

/** A run_status the dispatcher signs, then `filler` in its input in place of the signed placeholder: just under 4 MiB, with a bad signature. */
export function badSignatureBody(
  dispatcher: Dispatcher,
  target: HostTarget,
  runId: string,
  filler: (bytes: number) => string,
): { headers: Record<string, string>; body: Buffer } {
  const prepared = dispatcher.prepareAction(target, runAction('run_status', runId, { input: { run_id: runId, pad: '@@filler@@' } }));
  const room = MAX_BODY_BYTES - Buffer.byteLength(prepared.text) + Buffer.byteLength(PLACEHOLDER);
  const body = Buffer.from(prepared.text.replace(PLACEHOLDER, filler(room - 8)));
  if (body.length > MAX_BODY_BYTES || body.length < MAX_BODY_BYTES - 64) throw new Error(`a flood body of ${body.length} bytes`);
  return { headers: prepared.headers, body };
}

/** The largest committed heap (MB) of each isolate of a process run with `--trace-gc`, from its lines `[pid:isolate] … 199.6 (203.1) -> 199.6 (207.1) MB`. */
export function heapPeaks(traceGc: string): Map<string, number> {
  const peaks = new Map<string, number>();
  for (const match of traceGc.matchAll(/^\[\d+:(0x[0-9a-f]+)\][^\n]*? ms: [^\d\n]*([\d.]+) \(([\d.]+)\) -> ([\d.]+) \(([\d.]+)\) MB/gm)) {
    const [, isolate = '', , before = '0', , after = '0'] = match;
    peaks.set(isolate, Math.max(peaks.get(isolate) ?? 0, Number(before), Number(after)));
  }
  return peaks;
}
