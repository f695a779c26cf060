export { createMemoryLedger } from './memory.js';
export { createSqliteLedger, type SqliteLedgerOptions } from './sqlite.js';
export { createPostgresLedger, type PostgresLedgerOptions } from './postgres.js';
export type { BridgeJob, BridgeJobPatch, RunEvidence, RunLedger, IdempotencyRecord, IdempotencyScope, ClaimRequest, ClaimResult, RunEvidencePatch } from './types.js';
