/**
 * The conformance kit's vocabulary, independent of any one connector: the thirteen behaviour
 * checks of the AIP reference kit, what each scenario must assert, and the driver a connector
 * supplies so that the kit can exercise it.
 */
import type { AipManifest, ImplementationSupport } from '../../types.js';

export const SCENARIO_IDS = [
  'identity_credentials',
  'schema_enforcement',
  'idempotency_duplicates',
  'retry_exhaustion',
  'cancellation_races',
  'streaming_backpressure',
  'errors_uncertain_outcomes',
  'approval_lifecycle',
  'transaction_lifecycle',
  'audit_redaction',
  'webhook_security',
  'restart_reconnect',
] as const;

export type ScenarioId = (typeof SCENARIO_IDS)[number];

/** Every named assertion a scenario's evidence must hold true (the reference kit's list). */
export const REQUIRED_ASSERTIONS: Readonly<Record<ScenarioId, readonly string[]>> = {
  identity_credentials: ['transport_actor_bound', 'tenant_isolated', 'credential_handle_opaque'],
  schema_enforcement: ['invalid_input_rejected', 'invalid_output_rejected'],
  idempotency_duplicates: ['duplicate_suppressed', 'collision_rejected', 'delivery_id_stable'],
  retry_exhaustion: ['retryable_error_preserved', 'backoff_observed', 'exhaustion_dead_lettered'],
  cancellation_races: ['before_dispatch_cancelled', 'in_flight_cancelled', 'late_cancel_preserved_terminal'],
  streaming_backpressure: ['ordered_chunks', 'bounded_backpressure', 'terminal_chunk_unique'],
  errors_uncertain_outcomes: ['protocol_fields_preserved', 'uncertain_outcome_reconciled', 'error_secrets_redacted'],
  approval_lifecycle: ['authority_verified', 'quorum_enforced', 'evidence_persisted', 'resume_once'],
  transaction_lifecycle: ['plan_before_commit', 'provider_operation_checkpointed', 'reconcile_before_retry', 'compensation_governed'],
  audit_redaction: ['receipts_emitted', 'audit_correlated', 'sensitive_fields_redacted', 'raw_secret_absent'],
  webhook_security: ['signature_verified', 'skew_rejected', 'replay_rejected'],
  restart_reconnect: ['state_recovered', 'duplicate_effect_prevented', 'reconnect_cursor_resumed'],
};

export type EvidenceSource = 'deterministic_provider_double' | 'isolated_live_provider';

/** One assertion as observed: its outcome and the sentence that says what decided it. */
export interface AssertionOutcome {
  passed: boolean;
  reason: string;
}

/** What one exercised scenario observed. Every assertion is computed from observations, never declared. */
export interface ScenarioEvidence {
  source: EvidenceSource;
  assertions: Record<string, AssertionOutcome>;
  /** Stable ids of what was observed: action ids, run ids, proxy request ids, ledger bindings. */
  artifacts: string[];
  /** Parts of an AIP runtime the kit played around the connector (retry policy, approval authority, restart). */
  hostRoles: string[];
  /** The retained observations behind the assertions (never a key, never a prompt). */
  observations: Record<string, unknown>;
  detail: string;
}

/** A connector under test, as the kit sees it. */
export interface ConformanceDriver {
  readonly connectorId: string;
  readonly source: EvidenceSource;
  manifest(): AipManifest;
  implementationSupport(capabilityId: string): ImplementationSupport;
  /** Runs one scenario against the connector; rejects only when the scenario could not be run at all. */
  exercise(scenario: ScenarioId): Promise<ScenarioEvidence>;
  close(): Promise<void>;
}

/** The kit's time: real in the CLI, controllable in tests. */
export interface Clock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

export type CheckVerdict = 'passed' | 'failed' | 'not_applicable';

export interface AssertionRecord {
  name: string;
  passed: boolean;
  reason: string;
}

/** One of the thirteen behaviour checks, as the artifact records it. */
export interface BehaviourCheck {
  id: string;
  verdict: CheckVerdict;
  /** Why the manifest requires this scenario, or why it does not. */
  trigger: string;
  reason: string;
  assertions: AssertionRecord[];
  artifacts: string[];
  host_roles: string[];
  observations: Record<string, unknown>;
  duration_ms: number;
}

/** One of the reference kit's static manifest checks. */
export interface StaticCheck {
  id: string;
  passed: boolean;
  findings: string[];
}
