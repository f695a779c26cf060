/**
 * A clean-room simulator of the Hermes Agent API server's structured-run routes
 * (`/v1/runs`) and `GET /health`, written from `hermes-runs-api.md` and held against the
 * released Hermes by `test/real-hermes/fidelity.test.ts`. Profiles: `pin` is Hermes 0.18.2 (the
 * pinned revision), `v0.19` is Hermes 0.19.0, `v0.20` is Hermes 0.20.1, `later` the unreleased behaviour of the
 * reference's §9 (see `profiles.ts`).
 *
 * Deliberate simplifications:
 * - An `approval` step starts its tool (`tool.started`) and asks; the next `tool` step
 *   completes it. A denied (or timed-out) approval makes that `tool.completed` report `error: true`.
 * - A model turn is a run of `delta` steps; it ends at the next tool, approval or completion,
 *   where its text (trimmed) is repeated as `reasoning.available`, as Hermes does for every
 *   assistant message with text.
 * - `last_event` is null until the first event; `queued` lasts one loop turn.
 * - A script that ends without `complete`/`fail` completes with the streamed text.
 * - Where stop only interrupts (`v0.19`, `later`), it waits for the current step: `sleep` and
 *   `approval` wake at once, a running `tool` fails after `toolInterruptLagMs`, the
 *   `stepDelayMs` pause between steps does not wake (so `stopping` stays observable).
 */
export { startHermesSimulator } from './hermes/hermes-server.js';
export * from './herm/index.js';
export { pyJson, pyFloat, PyFloat } from './hermes/py-json.js';
export { PROFILE_TRAITS, SIMULATOR_PROFILES, isSimulatorProfile, type ProfileTraits } from './hermes/profiles.js';
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
} from './hermes/types.js';
