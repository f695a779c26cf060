import type { SimulatorProfile } from '../simulator/index.js';
import type { ArtifactIdentities } from '../cli/identities.js';
import type { BehaviourCheck, EvidenceSource, StaticCheck } from './kit/types.js';

export const CONFORMANCE_SCHEMA_ID = 'https://schemas.aip-connector-hermes-agent.local/conformance/conformance.schema.json';

/** How the static findings are read: the reference behaviour kit does not run them, so they never decide the result. */
export const STATIC_CHECKS_READING =
  'The static manifest checks are the reference kit’s gateway report, which its behaviour kit does not run: they are reported with every finding and reason, and do not decide the result or the exit code.';

export interface EndpointConformance {
  endpoint_id: string;
  display_name: string | null;
  base_url: string;
  tenant_binding: string | null;
  /** First 12 hex digits of SHA-256 of the API key. */
  credential_revision: string;
  credential_source: string;
  result: 'passed' | 'failed';
  started_at: string;
  finished_at: string;
  duration_ms: number;
  checks: BehaviourCheck[];
  static_checks: StaticCheck[];
}

export interface ConformanceArtifact {
  $schema: typeof CONFORMANCE_SCHEMA_ID;
  conformance_id: string;
  result: 'passed' | 'failed';
  started_at: string;
  finished_at: string;
  duration_ms: number;
  target: {
    kind: 'simulator' | 'configured';
    config_source: string;
    simulator_profile: SimulatorProfile | null;
    evidence_source: EvidenceSource;
    note: string;
  };
  identities: ArtifactIdentities;
  static_checks_reading: string;
  endpoints: EndpointConformance[];
  summary: { endpoints: number; checks: number; passed: number; failed: number; not_applicable: number; static_findings: number };
}

export function summarize(endpoints: EndpointConformance[]): ConformanceArtifact['summary'] {
  const checks = endpoints.flatMap((endpoint) => endpoint.checks);
  const count = (verdict: BehaviourCheck['verdict']) => checks.filter((check) => check.verdict === verdict).length;
  return {
    endpoints: endpoints.length,
    checks: checks.length,
    passed: count('passed'),
    failed: count('failed'),
    not_applicable: count('not_applicable'),
    static_findings: endpoints.flatMap((endpoint) => endpoint.static_checks).reduce((total, check) => total + check.findings.length, 0),
  };
}
