const FIRST_DELAY_MS = 1000;
const MAX_DELAY_MS = 60_000;

/**
 * The wait before retry `attempt` (1, 2, …): 1 s·2^(attempt-1) capped at 60 s, plus up to a quarter
 * of it at random so that deliveries failing together do not come back together (the AIP host
 * outbox's policy), and never less than the target asked for.
 */
export function retryDelayMs(attempt: number, askedMs: number | undefined, random: () => number = Math.random): number {
  const base = Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** Math.min(attempt - 1, 16));
  return Math.max(askedMs ?? 0, base + Math.floor(random() * (base / 4)));
}
