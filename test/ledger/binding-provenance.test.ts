/**
 * Migration 8: a binding records how its run was learned (`learned_from`) and when Hermes marked
 * it interrupted (`interrupted_at`). A ledger at schema version 7 keeps its bindings, which know
 * neither, and a binding written after the upgrade keeps both; an interrupted time, once a binding
 * is settled, is not changed by a later read.
 */
import { expect } from 'vitest';
import type { RunEvidence, RunLedger } from 'aip-connector-hermes-agent';
import { MIGRATIONS } from '../../src/ledger/migrations.js';
import { runBinding } from '../helpers/run-binding.js';
import { describeSchemaUpgrade } from '../helpers/schema-upgrade.js';

const T0 = 1_800_000_000_000;
const CAPABILITY = 'cap:hermes_agent:local:run_start';

const binding = (actionId: string, runId: string): RunEvidence => runBinding(T0, { action_id: actionId, run_id: runId });

async function upgradeCase(exec: (sql: string) => Promise<void>, open: () => RunLedger): Promise<void> {
  for (const migration of MIGRATIONS.filter((m) => m.version <= 7)) {
    for (const statement of migration.statements) await exec(statement);
  }
  await exec('CREATE TABLE IF NOT EXISTS ledger_schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)');
  await exec(`INSERT INTO ledger_schema_migrations VALUES ${[1, 2, 3, 4, 5, 6, 7].map((version) => `(${version}, ${T0})`).join(', ')}`);
  await exec(`INSERT INTO run_bindings (tenant_scope, action_id, capability_id, endpoint_id, tenant_id, run_id, session_id, credential_revision,
    created_at, updated_at, last_status, terminal_event, evidence_lost) VALUES ('', 'act_old', '${CAPABILITY}', 'local', NULL, 'run_old', 'run_old', NULL,
    ${T0}, ${T0}, 'running', NULL, 0)`);
  const ledger = open();
  try {
    expect(await ledger.evidence('act_old', null)).toEqual({ ...binding('act_old', 'run_old'), last_status: 'running' });

    await ledger.recordRun({ ...binding('act_new', 'run_new'), learned_from: 'provider_replay' });
    const run = { run_id: 'run_new', endpoint_id: 'local', tenant_id: null };
    await ledger.updateRun(run, { updated_at: T0 + 5, last_status: 'interrupted', interrupted_at: T0 + 4 });
    await ledger.updateRun(run, { updated_at: T0 + 9, last_status: 'interrupted', interrupted_at: T0 + 8 });
    expect(await ledger.evidence('act_new', null)).toEqual({
      ...binding('act_new', 'run_new'),
      learned_from: 'provider_replay',
      last_status: 'interrupted',
      interrupted_at: T0 + 4,
      updated_at: T0 + 9,
    });
    expect((await ledger.openRuns()).map((open) => open.action_id)).toEqual(['act_old']);
  } finally {
    await ledger.close();
  }
}

describeSchemaUpgrade('an existing ledger at schema version 7 gains how a run was learned and when it was interrupted, keeping its bindings', upgradeCase);
