import type { RunEvidence } from 'aip-connector-hermes-agent';

/** A run_start binding on endpoint `local` made at `at`, with no tenant and the run as its session unless overridden. */
export function runBinding(at: number, overrides: Partial<RunEvidence> & Pick<RunEvidence, 'action_id' | 'run_id'>): RunEvidence {
  return {
    capability_id: 'cap:hermes_agent:local:run_start',
    endpoint_id: 'local',
    tenant_id: null,
    session_id: overrides.run_id,
    credential_revision: null,
    created_at: at,
    updated_at: at,
    last_status: 'started',
    terminal_event: null,
    evidence_lost: false,
    ...overrides,
  };
}
