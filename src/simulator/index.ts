/**
 * A clean-room simulator of the Hermes Agent API server's structured-run routes
 * (`/v1/runs`), written from `hermes-runs-api.md`. Profile `pin` reproduces the
 * pinned revision's quirks; profile `later` adds the newer behaviour of §9.
 *
 * Deliberate simplifications:
 * - A script step `tool` emits `tool.started` and `tool.completed` back to back; an
 *   `approval` step is separate, so `approval.request` comes before `tool.started`.
 *   A denied (or timed-out) approval makes the next `tool` step report `error: true`,
 *   and that step's preview defaults to the approved command.
 * - `last_event` is null until the first event; `queued` lasts one loop turn.
 * - A script that ends without `complete`/`fail` completes with the streamed text.
 * - In `later`, stop waits for the current step: `sleep` and `approval` wake at once,
 *   the `stepDelayMs` pause between steps does not (so `stopping` stays observable).
 */
export { startHermesSimulator } from './hermes-server.js';
export * from './herm/index.js';
export { pyJson, pyFloat, PyFloat } from './py-json.js';
export type {
  HermesSimulator,
  HermesSimulatorOptions,
  RecordedRequest,
  RunStep,
  SimulatedRun,
  SimulatorFault,
  SimulatorMisbehaviour,
  SimulatorProfile,
  SimulatorRoute,
} from './types.js';
