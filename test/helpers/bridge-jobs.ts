/** Bridge job records as a bridge stores them, for tests that write the ledger directly. */
import type { BridgeJob } from 'aip-connector-hermes-agent';

/** 2027-01-15: every job's times count from here. */
export const JOB_T0 = 1_800_000_000_000;
export const JOB_LEASE = 30_000;
let counter = 0;

/** A job of no tenant, starting, leased by `bridge-a`; ids, key and times unique per call unless overridden. */
export function jobOf(overrides: Partial<BridgeJob> = {}): BridgeJob {
  const n = ++counter;
  return {
    tenant_id: null,
    session_id: `sesn_${n}`,
    tool_use_id: `toolu_${n}`,
    tool_name: 'hermes_run',
    tool_input: { prompt: 'Render', nested: { list: [1, 'two'] } },
    action_id: `herm_${n}`,
    idempotency_key: `herm-key-${n}`,
    run_id: null,
    state: 'starting',
    kickoff: 'pending',
    kickoff_event_id: null,
    final_status: null,
    final_event_id: null,
    created_at: JOB_T0 + n,
    updated_at: JOB_T0 + n,
    lease_owner: 'bridge-a',
    lease_expires_at: JOB_T0 + n + JOB_LEASE,
    ...overrides,
  };
}
