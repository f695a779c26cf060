export { createMemoryLedger, type MemoryLedgerOptions } from './memory.js';
export { AmbiguousEvidenceError } from './evidence.js';
export { createSqliteLedger, type SqliteLedgerOptions } from './sqlite.js';
export { createPostgresLedger, type PostgresLedgerOptions } from './postgres.js';
export type {
  BridgeJob,
  BridgeJobPatch,
  RunEvidence,
  RunLedger,
  IdempotencyRecord,
  IdempotencyScope,
  ClaimRequest,
  ClaimResult,
  RunEvidencePatch,
  RunRef,
  GrantUse,
  MessageClaim,
  ApprovalImport,
  EvidenceWrite,
} from './types.js';
