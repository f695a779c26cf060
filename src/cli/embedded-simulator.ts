import { randomBytes } from 'node:crypto';
import { startHermesSimulator, type HermesSimulator, type SimulatorProfile } from '../simulator/index.js';
import type { LoadedConfig } from './config.js';

/**
 * The Hermes simulator that `qualify --simulate` and `conformance --simulate` run against, on
 * 127.0.0.1 with a fresh random key, and its one endpoint (id `simulator`) as a loaded
 * configuration. Short intervals: a whole run against it takes seconds.
 */
export async function startEmbeddedSimulator(profile: SimulatorProfile): Promise<{ simulator: HermesSimulator; config: LoadedConfig }> {
  const apiKey = `hk_sim_${randomBytes(24).toString('hex')}`;
  const simulator = await startHermesSimulator({ apiKey, profile, keepaliveMs: 1000, stepDelayMs: 5, streamLookupMs: 200 });
  return {
    simulator,
    config: {
      source: 'embedded simulator',
      endpoints: [{ config: { id: 'simulator', baseUrl: simulator.url, apiKey }, keySource: 'generated for the embedded simulator' }],
    },
  };
}
