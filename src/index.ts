export { createHermesConnector } from './connector.js';
export { ConnectorConfigError, type ConfigErrorCode } from './config.js';
export { FAILURE_CATALOGUE, FAILURE_CATEGORIES, errorCode, type FailureCode, type ProviderCalled } from './failures.js';
export { capabilityId } from './contract/registry.js';
export { HERMES_PINNED_REVISION, CONNECTOR_PROFILE, USER_AGENT } from './internal/package-info.js';
export type * from './types.js';
export { OPERATION_NAMES } from './types.js';
export { createMemoryLedger, createSqliteLedger, createPostgresLedger, AmbiguousEvidenceError } from './ledger/index.js';
export type {
  RunEvidence,
  RunLedger,
  RunRef,
  GrantUse,
  MessageClaim,
  ApprovalImport,
  EvidenceWrite,
  MemoryLedgerOptions,
  SqliteLedgerOptions,
  PostgresLedgerOptions,
} from './ledger/index.js';
export { createHermBridge, applyToolUpdate } from './bridge/index.js';
export type { HermBridge, HermBridgeOptions, HermToolUseEvent, HermApprovalRequest, HermApprovalDecision, HermHistoryEvent } from './bridge/index.js';
export type { BridgeJob } from './ledger/index.js';
export type { JournalOptions, JournalState, EventsLost } from './journal/types.js';
export type {
  DeliveryTarget,
  DeliveryOutcome,
  OutboxEvent,
  DeliveryOptions,
  DeliveryRecord,
  DeliveryState,
  GiveUpReason,
} from './outbox/types.js';
