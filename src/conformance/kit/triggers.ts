import type { AipManifest } from '../../types.js';
import type { ScenarioId } from './types.js';

/** The reference kit's generic webhook profile id: advertising it is what triggers webhook_security. */
export const WEBHOOK_PROFILE = 'aip.http.webhook.v1';

export interface ScenarioTrigger {
  required: boolean;
  /** Which capabilities (or profile) trigger the scenario, or why none does: computed from the manifest. */
  because: string;
}

interface ContractView {
  idempotency?: { requirement?: string };
  execution?: { supports_retry?: boolean; supports_cancel?: boolean; supports_streaming?: boolean };
  approval?: { required?: boolean };
  transaction?: unknown;
}

const CONTRACT_TRIGGERS: Partial<Record<ScenarioId, { test: (contract: ContractView) => boolean; what: string }>> = {
  idempotency_duplicates: { test: (c) => c.idempotency?.requirement === 'required', what: 'idempotency `required`' },
  retry_exhaustion: { test: (c) => c.execution?.supports_retry === true, what: '`supports_retry`' },
  cancellation_races: { test: (c) => c.execution?.supports_cancel === true, what: '`supports_cancel`' },
  streaming_backpressure: { test: (c) => c.execution?.supports_streaming === true, what: '`supports_streaming`' },
  approval_lifecycle: { test: (c) => c.approval?.required === true, what: 'a required approval' },
  transaction_lifecycle: { test: (c) => c.transaction !== undefined && c.transaction !== null, what: 'a `transaction` contract' },
};

/** Whether the published manifest requires a scenario, by the reference kit's rules. */
export function scenarioTrigger(manifest: AipManifest, scenario: ScenarioId): ScenarioTrigger {
  if (scenario === 'webhook_security') {
    const advertised = manifest.profiles.includes(WEBHOOK_PROFILE);
    return {
      required: advertised,
      because: advertised
        ? `the manifest advertises ${WEBHOOK_PROFILE}`
        : `no profile of the manifest (${manifest.profiles.join(', ')}) is ${WEBHOOK_PROFILE}: the connector receives no webhooks`,
    };
  }
  const rule = CONTRACT_TRIGGERS[scenario];
  if (!rule) {
    const count = manifest.capabilities.length;
    return { required: count > 0, because: `required of every connector that publishes a capability (${count} published)` };
  }
  const triggering = manifest.capabilities.filter((capability) => rule.test(capability.contract as ContractView)).map((capability) => capability.id);
  return triggering.length > 0
    ? { required: true, because: `${rule.what} on ${triggering.join(', ')}` }
    : { required: false, because: `no capability of the manifest declares ${rule.what}` };
}
