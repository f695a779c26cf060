/**
 * Heap measurement. A full GC comes from `global.gc` when node runs with --expose-gc, and
 * otherwise from V8 itself: the flag is switched on at run time and `gc` is read from a fresh
 * context, so `npm run bench` (plain `tsx bench/main.ts`) needs no extra node options.
 *
 * Peak heap growth = max(heapUsed sampled while the work runs) - heapUsed after two full GCs
 * just before it starts. heapUsed is `process.memoryUsage().heapUsed`: live objects plus garbage
 * not yet collected, JS heap only (Buffers' backing stores are `external`, not counted). The
 * sampler reads it once per event-loop turn (a self-rescheduling setImmediate), that is after
 * every socket read the stream makes, and once more when the work has finished with its result
 * still referenced.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

let cachedGc: (() => void) | undefined;

/** `passes` full collections; two settle what the first one's finalizers released. */
export function fullGc(passes = 2): void {
  if (!cachedGc) {
    const exposed = (globalThis as { gc?: () => void }).gc;
    if (typeof exposed === 'function') cachedGc = exposed;
    else {
      setFlagsFromString('--expose-gc');
      cachedGc = runInNewContext('gc') as () => void;
    }
  }
  for (let pass = 0; pass < passes; pass++) cachedGc();
}

export function gcSource(): string {
  return typeof (globalThis as { gc?: unknown }).gc === 'function' ? 'global.gc (--expose-gc)' : 'v8.setFlagsFromString("--expose-gc") + vm gc';
}

export interface HeapMeasurement<T> {
  result: T;
  /** heapUsed after two full GCs, before the work. */
  startBytes: number;
  /** Peak heapUsed seen while the work ran, minus startBytes. */
  peakGrowthBytes: number;
  /** heapUsed after two full GCs with the result still referenced, minus startBytes: what the result keeps alive. */
  retainedGrowthBytes: number;
  samples: number;
}

/** Runs `work` and reports its peak heap growth, and what its result still holds after a full GC. */
export async function measureHeap<T>(work: () => Promise<T>): Promise<HeapMeasurement<T>> {
  fullGc();
  const startBytes = process.memoryUsage().heapUsed;
  let peak = startBytes;
  let samples = 0;
  let running = true;
  const sample = () => {
    const used = process.memoryUsage().heapUsed;
    samples++;
    if (used > peak) peak = used;
  };
  const tick = () => {
    sample();
    if (running) setImmediate(tick);
  };
  setImmediate(tick);
  let result: T;
  try {
    result = await work();
    sample();
  } finally {
    running = false;
  }
  fullGc();
  const retainedGrowthBytes = process.memoryUsage().heapUsed - startBytes;
  return { result, startBytes, peakGrowthBytes: peak - startBytes, retainedGrowthBytes, samples };
}
