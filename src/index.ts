export { createHermesConnector } from './connector.js';
export { ConnectorConfigError, type ConfigErrorCode } from './config.js';
export { FAILURE_CATEGORIES, type FailureCode } from './failures.js';
export { HERMES_PINNED_REVISION, CONNECTOR_PROFILE, USER_AGENT } from './package-info.js';
export type * from './types.js';
export { OPERATION_NAMES } from './types.js';
export { createMemoryLedger, createSqliteLedger, createPostgresLedger } from './ledger/index.js';
export type { RunEvidence, RunLedger, SqliteLedgerOptions, PostgresLedgerOptions } from './ledger/index.js';
