export {
  createHermBridge,
  idempotencyKeyOf,
  type HermBridge,
  type HermBridgeOptions,
  type HermToolUseEvent,
  type HermApprovalRequest,
  type HermApprovalDecision,
} from './bridge.js';
export { applyToolUpdate, type HermHistoryEvent } from './tool-update.js';
