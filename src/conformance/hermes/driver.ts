import { createHermesConnector } from '../../index.js';
import type { Clock, ConformanceDriver, ScenarioEvidence, ScenarioId } from '../kit/types.js';
import { Harness, type ConnectorFactory, type ProviderAccess } from './harness.js';
import { startRecordingProxy } from './proxy.js';
import { approvalLifecycle } from './scenarios/approval.js';
import { auditRedaction } from './scenarios/audit.js';
import { cancellationRaces } from './scenarios/cancellation.js';
import { errorsUncertainOutcomes } from './scenarios/errors.js';
import { idempotencyDuplicates } from './scenarios/idempotency.js';
import { identityCredentials } from './scenarios/identity.js';
import { restartReconnect } from './scenarios/restart.js';
import { retryExhaustion } from './scenarios/retry.js';
import { schemaEnforcement } from './scenarios/schema.js';
import { streamingBackpressure } from './scenarios/streaming.js';

type Scenario = (harness: Harness) => Promise<ScenarioEvidence>;

/** The scenarios this connector can be exercised in; the others are not triggered by its manifest. */
const SCENARIOS: Partial<Record<ScenarioId, Scenario>> = {
  identity_credentials: identityCredentials,
  schema_enforcement: schemaEnforcement,
  idempotency_duplicates: idempotencyDuplicates,
  retry_exhaustion: retryExhaustion,
  cancellation_races: cancellationRaces,
  streaming_backpressure: streamingBackpressure,
  errors_uncertain_outcomes: errorsUncertainOutcomes,
  approval_lifecycle: approvalLifecycle,
  audit_redaction: auditRedaction,
  restart_reconnect: restartReconnect,
};

export interface HermesDriverOptions {
  provider: ProviderAccess;
  clock: Clock;
  /** The connector under test (default: this package's createHermesConnector). */
  connector?: ConnectorFactory;
}

export const defaultConnectorFactory: ConnectorFactory = (options) =>
  createHermesConnector({ endpoints: [options.endpoint], logger: options.logger, ...(options.ledger ? { ledger: options.ledger } : {}) });

/** The Hermes connector as the conformance kit drives it: every call goes through a recording proxy in front of the provider. */
export async function createHermesDriver(options: HermesDriverOptions): Promise<ConformanceDriver> {
  const proxy = await startRecordingProxy(options.provider.baseUrl, options.provider.apiKey, options.clock);
  const harness = new Harness(options.provider, proxy, options.clock, options.connector ?? defaultConnectorFactory);
  const published = harness.connector();
  return {
    connectorId: published.id,
    source: options.provider.source,
    manifest: () => published.manifest(),
    implementationSupport: (capabilityId) => published.implementationSupport(capabilityId),
    async exercise(scenario) {
      const run = SCENARIOS[scenario];
      if (!run) throw new Error(`the Hermes driver has no ${scenario} scenario`);
      return run(harness);
    },
    async close() {
      try {
        await harness.cleanUp();
      } finally {
        await proxy.close();
      }
    },
  };
}
