/**
 * Deliberately broken ledgers for the torture's own test: a torture that does not fail against
 * them proves nothing.
 * - claim-always: the claim ignores every existing record and lease and always answers
 *   "claimed", so a resubmitted action is sent again.
 * - skip-delivery: the outbox records one event more as delivered than the target took (the
 *   cursor runs ahead of the delivery), so events are never sent.
 */
import type { RunLedger } from 'aip-connector-hermes-agent';
import type { BrokenLedger } from './plan.js';

/** The outbox a durable ledger offers under this symbol (src/outbox/types.ts `DELIVERY_STORE`). */
const DELIVERY_STORE = Symbol.for('aip-connector-hermes-agent.deliveryStore');

/** `target` with some properties replaced; its own methods stay bound to it. */
function overriding<T extends object>(target: T, overrides: Partial<Record<string | symbol, unknown>>): T {
  return new Proxy(target, {
    get(inner, property) {
      if (property in overrides) return overrides[property];
      const value: unknown = Reflect.get(inner, property);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(inner) : value;
    },
  });
}

interface Advancing {
  advance(key: unknown, targetId: string, owner: string, deliveredThrough: number, now: number): Promise<boolean>;
}

export function broken(ledger: RunLedger, kind: BrokenLedger): RunLedger {
  if (kind === 'claim-always') return overriding(ledger, { claim: async () => ({ claimed: true }) });
  const store = (ledger as unknown as Record<symbol, Advancing>)[DELIVERY_STORE] as Advancing;
  const skipping = overriding(store, {
    advance: (key: unknown, targetId: string, owner: string, deliveredThrough: number, now: number) =>
      store.advance(key, targetId, owner, deliveredThrough + 1, now),
  });
  return overriding(ledger, { [DELIVERY_STORE]: skipping });
}
