import type { EndpointOffer } from '../index.js';
import type { SimulatorProfile } from '../simulator/index.js';
import type { ArtifactIdentities } from './identities.js';
import type { CheckId } from './qualify/types.js';

export const EVIDENCE_SCHEMA_ID = 'https://schemas.aip-connector-hermes-agent.local/qualification/evidence.schema.json';

export type Verdict = 'passed' | 'failed';

export interface CheckRecord {
  id: CheckId;
  /** 1-8, the seed's numbering. */
  number: number;
  title: string;
  result: Verdict;
  reason: string | null;
  started_at: string;
  finished_at: string;
  duration_ms: number;
  evidence: Record<string, unknown>;
}

export interface CleanupRecord {
  run_id: string;
  started_by: string;
  actions: string[];
}

/** The Hermes that answered, as it says itself (`GET /health`). */
export interface HermesIdentity {
  /** E.g. "0.19.0"; the simulator's ends in "+aip-simulator"; null when it could not be read. */
  version: string | null;
  platform: string | null;
  read_from: 'GET /health';
  /** Why the version is unknown; null when it was read. */
  problem: string | null;
}

/** What the endpoint declared it offers (`GET /v1/capabilities`, read with its key before the checks). */
export interface OfferRecord {
  source: EndpointOffer['source'];
  read_at: string;
  durable_run_idempotency: EndpointOffer['durable_run_idempotency'];
  run_steer: boolean;
}

export interface EndpointRecord {
  endpoint_id: string;
  display_name: string | null;
  base_url: string;
  hermes: HermesIdentity;
  offer: OfferRecord;
  tenant_binding: string | null;
  /** First 12 hex digits of SHA-256 of the API key. */
  credential_revision: string;
  /** Where the key was read (a file path or an environment variable name), never the key. */
  credential_source: string;
  result: Verdict;
  started_at: string;
  finished_at: string;
  duration_ms: number;
  checks: CheckRecord[];
  cleanup: CleanupRecord[];
}

export interface PromptRecord {
  default: boolean;
  sha256: string;
  length: number;
}

export interface QualificationEvidence {
  $schema: typeof EVIDENCE_SCHEMA_ID;
  qualification_id: string;
  result: Verdict | 'interrupted';
  started_at: string;
  finished_at: string;
  duration_ms: number;
  target: { kind: 'simulator' | 'live'; config_source: string; simulator_profile: SimulatorProfile | null; note: string };
  identities: ArtifactIdentities;
  settings: {
    step_timeout_ms: number;
    approval_choice: string;
    approval_prompt: PromptRecord;
    harmless_prompt: PromptRecord;
    ledger: { kind: 'memory' | 'sqlite' | 'postgres'; location: string };
  };
  endpoints: EndpointRecord[];
  summary: { endpoints: number; checks: number; passed: number; failed: number };
}
