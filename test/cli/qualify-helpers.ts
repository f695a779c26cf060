import type { RunLedger } from '../../src/index.js';
import type { QualifySettings } from '../../src/cli/qualify/session.js';
import { simulatorScripts } from '../../src/cli/qualify/simulator-scripts.js';

/** Settings for driving qualification checks in-process against the simulator. */
export function simulatorQualifySettings(extra: Partial<QualifySettings> = {}): QualifySettings {
  return {
    qualificationId: 'qual_test',
    stepTimeoutMs: 5_000,
    pollMs: 20,
    silentRunMs: 2_000,
    approvalPrompt: 'approve me',
    harmlessPrompt: 'ready',
    signal: new AbortController().signal,
    scripts: simulatorScripts('rm -rf ./scratch'),
    ...extra,
  };
}

/** The ledger with some of its methods replaced: a misbehaving or failing ledger for one test. */
export function ledgerOverriding(inner: RunLedger, overrides: Partial<RunLedger>): RunLedger {
  return new Proxy(inner, {
    get(target, property) {
      if (Object.hasOwn(overrides, property)) return overrides[property as keyof RunLedger];
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
