/**
 * A clean-room simulator of the Hermes Agent API server's structured-run routes
 * (`/v1/runs`), written from `hermes-runs-api.md`. Profile `pin` reproduces the
 * pinned revision's quirks; profile `later` adds the newer behaviour of §9.
 */
export { startHermesSimulator } from './hermes-server.js';
export { pyJson, pyFloat, PyFloat } from './py-json.js';
export type {
  HermesSimulator,
  HermesSimulatorOptions,
  RecordedRequest,
  RunStep,
  SimulatedRun,
  SimulatorFault,
  SimulatorProfile,
  SimulatorRoute,
} from './types.js';
