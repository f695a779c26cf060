/**
 * A deliberately broken ledger for the torture's own test: its claim ignores every existing
 * record and lease and always answers "claimed", so a resubmitted action is sent again. A
 * torture that does not fail against it proves nothing.
 */
import type { RunLedger } from 'aip-connector-hermes-agent';

export function alwaysClaims(ledger: RunLedger): RunLedger {
  return new Proxy(ledger, {
    get(target, property) {
      if (property === 'claim') return async () => ({ claimed: true });
      const value: unknown = Reflect.get(target, property);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
