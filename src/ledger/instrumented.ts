import type { Telemetry } from '../telemetry.js';
import { endSpan } from '../telemetry.js';
import { LEDGER_METHODS, type RunLedger } from './types.js';

/**
 * The ledger with a span (`aip.ledger <method>`, a child of the active context) and an
 * `aip.ledger.operation.duration` point per call. Arguments and results are never recorded:
 * they hold tenant data and stored results.
 */
export function instrumentLedger(ledger: RunLedger, telemetry: Telemetry): RunLedger {
  const instrumented = Object.create(ledger) as RunLedger;
  for (const method of LEDGER_METHODS) {
    const call = (ledger[method] as (...args: unknown[]) => Promise<unknown>).bind(ledger);
    const attributes = { 'aip.ledger.backend': ledger.kind, 'aip.ledger.method': method };
    const observed = async (args: unknown[]) => {
      const span = telemetry.startInternal(`aip.ledger ${method}`, undefined, attributes);
      const started = performance.now();
      let errorType: string | undefined;
      try {
        return await call(...args);
      } catch (error) {
        errorType = error instanceof Error ? error.name : 'unknown';
        throw error;
      } finally {
        endSpan(span, errorType);
        if (telemetry.metering) {
          telemetry.ledgerDuration.record(
            (performance.now() - started) / 1000,
            errorType === undefined ? attributes : { ...attributes, 'error.type': errorType },
          );
        }
      }
    };
    // Untraced and unmetered (no SDK): the call itself, with no span, clock read or extra promise.
    (instrumented as unknown as Record<string, unknown>)[method] = (...args: unknown[]) =>
      telemetry.metering || telemetry.tracing ? observed(args) : call(...args);
  }
  return instrumented;
}
