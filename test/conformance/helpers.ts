import { startHermesSimulator, type HermesSimulator, type SimulatorProfile } from '../../src/simulator/index.js';
import { createHermesDriver, defaultConnectorFactory } from '../../src/conformance/hermes/driver.js';
import type { ConnectorFactory, ProviderAccess } from '../../src/conformance/hermes/harness.js';
import { runBodies } from '../../src/conformance/hermes/run-bodies.js';
import { systemClock, type ConformanceDriver } from '../../src/conformance/kit/types.js';

export const KEY = 'hk_conformance_test_7c1f0e2a9b4d6e8f';

export interface SimulatedTarget {
  simulator: HermesSimulator;
  driver: ConformanceDriver;
  close(): Promise<void>;
}

/** The kit's driver against a fresh simulator, with the connector built by `factory`. */
export async function simulatedTarget(profile: SimulatorProfile = 'pin', factory: ConnectorFactory = defaultConnectorFactory): Promise<SimulatedTarget> {
  const simulator = await startHermesSimulator({ apiKey: KEY, profile, keepaliveMs: 1000, stepDelayMs: 5, streamLookupMs: 200 });
  const provider: ProviderAccess = {
    baseUrl: simulator.url,
    apiKey: KEY,
    endpointId: 'simulator',
    source: 'deterministic_provider_double',
    bodies: runBodies(true),
    stepTimeoutMs: 10_000,
    pollMs: 20,
  };
  const driver = await createHermesDriver({ provider, clock: systemClock, connector: factory });
  return {
    simulator,
    driver,
    async close() {
      await driver.close();
      await simulator.close();
    },
  };
}
