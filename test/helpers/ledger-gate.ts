/**
 * Makes "a duplicate arrives while the first call is still in flight" certain instead of
 * likely: ledgers wrapped here hold back every `settle` until one of them has answered a
 * claim with someone else's in-flight record (or until a bound passes, so that a broken
 * connector fails its assertions instead of hanging). Every claim answer is logged.
 */
import type { RunLedger } from 'aip-connector-hermes-agent';

type ClaimResult = Awaited<ReturnType<RunLedger['claim']>>;

export interface LedgerGate {
  ledgers: RunLedger[];
  /** Every claim answer, in order, from every wrapped ledger. */
  claims: ClaimResult[];
  /** How many claims found another caller's live in-flight record. */
  inFlightSeen(): number;
}

export function gateSettlesUntilInFlightSeen(ledgers: RunLedger[], boundMs = 5_000): LedgerGate {
  const claims: ClaimResult[] = [];
  let open!: () => void;
  const seen = new Promise<void>((resolve) => {
    open = resolve;
  });
  const bounded = (): Promise<void> => Promise.race([seen, new Promise<void>((resolve) => setTimeout(resolve, boundMs).unref())]);
  const wrap = (ledger: RunLedger): RunLedger =>
    new Proxy(ledger, {
      get(target, property) {
        if (property === 'claim') {
          return async (request: Parameters<RunLedger['claim']>[0]) => {
            const result = await target.claim(request);
            claims.push(result);
            if (!result.claimed && result.record.state === 'in_flight') open();
            return result;
          };
        }
        if (property === 'settle') {
          return async (...args: Parameters<RunLedger['settle']>) => {
            await bounded();
            return target.settle(...args);
          };
        }
        const value: unknown = Reflect.get(target, property);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  return {
    ledgers: ledgers.map(wrap),
    claims,
    inFlightSeen: () => claims.filter((result) => !result.claimed && result.record.state === 'in_flight').length,
  };
}
