/**
 * The reference gateway's replay policy (`enforce_replay_policy`): `sent_at` within
 * [now − 300 s, now + 30 s], then the message id claimed in the durable replay store. Claimed
 * after every route check and before execution, so a refused message (401/403/429/503) may be
 * sent again, and an executed one never runs twice on any replica.
 *
 * The claim outlives the window: the window still admits `sent_at` at now = sent_at + 300 s (its
 * inclusive end), and a claim ending there would be expired (and purged) at that very millisecond,
 * so the replay would be claimed again and run twice. It lives until sent_at + 300 s + 30 s (the
 * future skew allowed), so the window and the claim never meet, even between replicas whose clocks
 * differ by up to that much.
 */
import type { RunLedger } from '../ledger/types.js';

export const REPLAY_WINDOW_MS = 300_000;
export const MAX_FUTURE_SKEW_MS = 30_000;
/** How long a claim outlives the last instant the window admits its sent_at. */
export const CLAIM_MARGIN_MS = MAX_FUTURE_SKEW_MS;
const PURGE_INTERVAL_MS = 60_000;

/** Why a message is refused as a replay (the text of the reference's `GatewayError::Replay`), or undefined when admitted. */
export type ReplayVerdict = { refused: string } | undefined;

export class ReplayGuard {
  readonly #ledger: RunLedger;
  readonly #now: () => number;
  readonly #onPurgeError: (error: unknown) => void;
  #lastPurge = 0;

  constructor(ledger: RunLedger, now: () => number, onPurgeError: (error: unknown) => void) {
    this.#ledger = ledger;
    this.#now = now;
    this.#onPurgeError = onPurgeError;
  }

  /** Refuses a message outside the window or already claimed; otherwise claims it. A failing ledger rejects. */
  async admit(messageId: string, sentAt: number): Promise<ReplayVerdict> {
    const now = this.#now();
    // Written so that a sent_at that is not a time (NaN) is outside the window too.
    if (!(sentAt >= now - REPLAY_WINDOW_MS && sentAt <= now + MAX_FUTURE_SKEW_MS)) {
      return { refused: `replayed message \`${messageId} outside accepted timestamp window\`` };
    }
    this.#purgeNow(now);
    const claimed = await this.#ledger.claimMessage({ message_id: messageId, expires_at: sentAt + REPLAY_WINDOW_MS + CLAIM_MARGIN_MS }, now);
    return claimed ? undefined : { refused: `replayed message \`${messageId}\`` };
  }

  /** Forgets expired claims at most once a minute, in the background: the store stays bounded by the traffic of one window. */
  #purgeNow(now: number): void {
    if (now - this.#lastPurge < PURGE_INTERVAL_MS) return;
    this.#lastPurge = now;
    this.#ledger.purgeExpired(now).catch(this.#onPurgeError);
  }
}
