/** Small statistics and the interleaved-rounds driver every ratio in the suite goes through. */

export interface Summary {
  median: number;
  min: number;
  max: number;
  n: number;
}

export function summarize(values: readonly number[]): Summary {
  if (values.length === 0) return { median: Number.NaN, min: Number.NaN, max: Number.NaN, n: 0 };
  const sorted = [...values].sort((a, b) => a - b);
  return { median: quantileOfSorted(sorted, 0.5), min: sorted[0] as number, max: sorted[sorted.length - 1] as number, n: sorted.length };
}

/** Linear-interpolated quantile (q in 0..1). */
export function quantile(values: readonly number[], q: number): number {
  return quantileOfSorted(
    [...values].sort((a, b) => a - b),
    q,
  );
}

function quantileOfSorted(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const at = (sorted.length - 1) * q;
  const low = Math.floor(at);
  const high = Math.ceil(at);
  const a = sorted[low] as number;
  const b = sorted[high] as number;
  return a + (b - a) * (at - low);
}

/** This process's user + system CPU in microseconds: since `since`, or since it started. */
export function cpuMicros(since?: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(since);
  return used.user + used.system;
}

export function mean(values: readonly number[]): number {
  let sum = 0;
  for (const value of values) sum += value;
  return values.length === 0 ? Number.NaN : sum / values.length;
}

/** One measured (or warm-up) round of one contender. */
export interface RoundRecord<T> {
  round: number;
  /** Where the contender ran in the round's first slice: 0 first, 1 second, ... */
  position: number;
  contender: string;
  warmup: boolean;
  result: T;
}

export interface InterleaveOptions<S, R> {
  rounds: number;
  warmupRounds: number;
  /**
   * Each round is made of this many slices; every contender runs once per slice, so on a busy
   * machine the contenders alternate every few hundred milliseconds. `merge` turns a
   * contender's slices into its figure for the round. Default: one slice, used as is.
   */
  slices?: number;
  merge?: (slices: S[]) => R;
  /** Runs before every contender run, outside the measurement (a full GC, for instance). */
  before?: () => void | Promise<void>;
  /** Runs once before every round, outside the measurement. */
  beforeRound?: () => void | Promise<void>;
}

/**
 * Runs every contender once per slice, rotating who goes first (A B, B A, A B, ... for two;
 * A B C, B C A, C A B for three), so drift in the machine (thermal, other load, a GC debt)
 * falls on every contender alike and paired ratios compare runs made moments apart.
 */
export async function interleave<S, K extends string, R = S>(
  contenders: Record<K, () => Promise<S>>,
  options: InterleaveOptions<S, R>,
): Promise<{ rounds: Record<K, R[]>; records: RoundRecord<R>[] }> {
  const names = Object.keys(contenders) as K[];
  const slices = options.slices ?? 1;
  const merge = options.merge ?? ((parts: S[]) => parts[0] as unknown as R);
  const rounds = Object.fromEntries(names.map((name) => [name, [] as R[]])) as Record<K, R[]>;
  const records: RoundRecord<R>[] = [];
  const total = options.warmupRounds + options.rounds;
  let turn = 0;
  for (let index = 0; index < total; index++) {
    const warmup = index < options.warmupRounds;
    const round = warmup ? index : index - options.warmupRounds;
    const parts = Object.fromEntries(names.map((name) => [name, [] as S[]])) as Record<K, S[]>;
    const first = turn;
    await options.beforeRound?.();
    for (let slice = 0; slice < slices; slice++, turn++) {
      for (let position = 0; position < names.length; position++) {
        const name = names[(turn + position) % names.length] as K;
        await options.before?.();
        parts[name].push(await contenders[name]());
      }
    }
    for (const name of names) {
      const result = merge(parts[name]);
      records.push({ round, position: (names.indexOf(name) - (first % names.length) + names.length) % names.length, contender: name, warmup, result });
      if (!warmup) rounds[name].push(result);
    }
  }
  return { rounds, records };
}

/** Per-round ratios numerator[i] / denominator[i]: each pair was measured in the same round. */
export function pairedRatios(numerator: readonly number[], denominator: readonly number[]): number[] {
  return numerator.map((value, index) => value / (denominator[index] as number));
}
