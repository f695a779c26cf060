/**
 * A clean-room simulator of Herm's session events for custom tools, written from the seed
 * "Long-running tools" and the wire format in `connector-api.md` ("The Herm bridge").
 *
 * Routes: `POST /v1/sessions/{session_id}/events` (user.custom_tool_result) and
 * `GET /v1/sessions/{session_id}/stream` (SSE), both authenticated by `x-api-key`.
 *
 * Assumptions where the seed is silent:
 * - A `running` result for a tool_use_id the simulator never saw is treated as answering a pending
 *   call (so a bridge can be driven with hand-made `agent.custom_tool_use` events); a final result
 *   for one is appended and starts a turn. `emitToolUse` and `expire` give a real pending call or a 410.
 * - A completed/failed result after the call expired is appended (the seed's "without a matching
 *   running result"); only a `running` result gets 410 after expiry.
 * - An immediate completed/failed result to a pending call resolves the blocked turn: it is not a
 *   continuation.
 * - A repeated `running` result while the call is running returns the accepted one (202, same id);
 *   a `running` result after the final one is 409.
 * - One request may carry several events (all checked before any is applied), but not the same
 *   tool_use_id twice (400).
 * - History holds accepted results only; `agent.custom_tool_use` goes to the stream, not history.
 *   Streams do not replay: a subscriber sees what happens after it connected.
 */
export { startHermSimulator } from './server.js';
export type {
  HermCustomToolUse,
  HermFault,
  HermRecordedRequest,
  HermSimulator,
  HermSimulatorOptions,
  HermToolCallRequest,
  HermToolCallState,
  HermToolCallView,
} from './types.js';
