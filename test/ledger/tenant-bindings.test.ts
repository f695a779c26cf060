import { describe, expect, it } from 'vitest';
import { AmbiguousEvidenceError, ConnectorConfigError, createMemoryLedger, type GrantUse, type RunEvidence, type RunLedger } from 'aip-connector-hermes-agent';
import { MIGRATIONS } from '../../src/ledger/migrations.js';
import { LEDGER_BACKENDS } from '../helpers/ledgers.js';
import { describeSchemaUpgrade } from '../helpers/schema-upgrade.js';
import { runBinding } from '../helpers/run-binding.js';

const T0 = 1_800_000_000_000;
let counter = 0;
const unique = (prefix: string) => `${prefix}_${process.pid}_${++counter}`;

function bindingOf(overrides: Partial<RunEvidence> = {}): RunEvidence {
  return runBinding(T0, { action_id: unique('act'), run_id: unique('run'), tenant_id: 'tenant-a', session_id: 'session-1', ...overrides });
}

const refOf = (binding: RunEvidence) => ({ run_id: binding.run_id, endpoint_id: binding.endpoint_id, tenant_id: binding.tenant_id });

function useOf(overrides: Partial<GrantUse> = {}): GrantUse {
  return {
    tenant_id: 'tenant-a',
    approval_id: unique('appr'),
    capability_id: 'cap:hermes_agent:local:run_approval',
    idempotency_key: unique('key'),
    action_id: unique('act'),
    used_at: T0,
    expires_at: T0 + 60_000,
    ...overrides,
  };
}

describe.each(LEDGER_BACKENDS)('tenant-scoped bindings: $name', (backend) => {
  const fresh = async () => (await backend.create()).ledger;

  it('two tenants binding the same action id keep two bindings; each lookup with a tenant sees only its own', async () => {
    const ledger = await fresh();
    const a = bindingOf({ action_id: 'act_shared' });
    const b = bindingOf({ action_id: 'act_shared', tenant_id: 'tenant-b', session_id: 'session-b' });
    const none = bindingOf({ action_id: 'act_shared', tenant_id: null });
    for (const binding of [a, b, none]) await ledger.recordRun(binding);
    expect(await ledger.evidence('act_shared', 'tenant-a')).toEqual(a);
    expect(await ledger.evidence('act_shared', 'tenant-b')).toEqual(b);
    expect(await ledger.evidence('act_shared', null)).toEqual(none);
    expect(await ledger.evidence('act_shared', 'tenant-c')).toBeNull();
    await expect(ledger.evidence('act_shared')).rejects.toBeInstanceOf(AmbiguousEvidenceError);
    // Run ids are unambiguous, and never visible to another tenant.
    expect(await ledger.evidence(b.run_id)).toEqual(b);
    expect(await ledger.evidence(b.run_id, 'tenant-a')).toBeNull();
  });

  it("updateRun touches only the given tenant's binding of the run", async () => {
    const ledger = await fresh();
    const a = bindingOf();
    const b = bindingOf({ tenant_id: 'tenant-b', run_id: a.run_id });
    await ledger.recordRun(a);
    await ledger.recordRun(b);
    await ledger.updateRun(refOf(b), { updated_at: T0 + 1, last_status: 'running' });
    expect(await ledger.evidence(a.action_id, 'tenant-a')).toEqual(a);
    expect(await ledger.evidence(b.action_id, 'tenant-b')).toEqual({ ...b, updated_at: T0 + 1, last_status: 'running' });
    await ledger.updateRun({ ...refOf(a), tenant_id: null }, { updated_at: T0 + 2, last_status: 'failed' });
    expect(await ledger.evidence(a.action_id, 'tenant-a')).toEqual(a);
  });

  it('recording the same (tenant, action) again replaces the whole binding', async () => {
    const ledger = await fresh();
    const first = bindingOf({ last_status: 'completed', terminal_event: 'run.completed' });
    await ledger.recordRun(first);
    const second = bindingOf({ action_id: first.action_id, created_at: T0 + 5, updated_at: T0 + 5 });
    await ledger.recordRun(second);
    expect(await ledger.evidence(first.action_id, 'tenant-a')).toEqual(second);
    expect(await ledger.evidence(first.run_id)).toBeNull();
  });
});

describe.each(LEDGER_BACKENDS)('a recorded terminal outcome is final: $name', (backend) => {
  const fresh = async () => (await backend.create()).ledger;

  it.each([
    ['a terminal event', { last_status: 'completed', terminal_event: 'run.completed' }],
    ['a terminal status', { last_status: 'cancelled', terminal_event: null }],
  ])('after %s, a late read changes only updated_at', async (_, settled) => {
    const ledger = await fresh();
    const binding = bindingOf();
    await ledger.recordRun(binding);
    await ledger.updateRun(refOf(binding), { updated_at: T0 + 1, ...settled });
    const recorded = { ...binding, updated_at: T0 + 1, ...settled };
    await ledger.updateRun(refOf(binding), { updated_at: T0 + 2, last_status: 'running' });
    await ledger.updateRun(refOf(binding), { updated_at: T0 + 3, evidence_lost: true });
    await ledger.updateRun(refOf(binding), { updated_at: T0 + 4, last_status: 'failed', terminal_event: 'run.failed' });
    expect(await ledger.evidence(binding.action_id, 'tenant-a')).toEqual({ ...recorded, updated_at: T0 + 4 });
    expect(await ledger.openRuns()).toEqual([]);
  });

  it('lost evidence may still learn a terminal event (a late stream result), and is settled after it', async () => {
    const ledger = await fresh();
    const binding = bindingOf();
    await ledger.recordRun(binding);
    await ledger.updateRun(refOf(binding), { updated_at: T0 + 1, evidence_lost: true });
    await ledger.updateRun(refOf(binding), { updated_at: T0 + 2, last_status: 'completed', terminal_event: 'run.completed' });
    await ledger.updateRun(refOf(binding), { updated_at: T0 + 3, last_status: 'running' });
    expect(await ledger.evidence(binding.action_id, 'tenant-a')).toEqual({
      ...binding,
      updated_at: T0 + 3,
      evidence_lost: true,
      last_status: 'completed',
      terminal_event: 'run.completed',
    });
  });
});

describe.each(LEDGER_BACKENDS)('approval grant uses: $name', (backend) => {
  const fresh = async () => (await backend.create()).ledger;

  it('the first (capability, key) keeps the grant; it may present it again, nobody else may', async () => {
    const ledger = await fresh();
    const first = useOf();
    expect(await ledger.useGrant(first)).toEqual(first);
    expect(await ledger.useGrant({ ...first, action_id: unique('retry'), used_at: T0 + 1 })).toEqual(first);
    expect(await ledger.useGrant({ ...first, idempotency_key: unique('other'), action_id: unique('act') })).toEqual(first);
    expect(await ledger.useGrant({ ...first, capability_id: 'cap:hermes_agent:local:run_stop' })).toEqual(first);
    // Another tenant's grant with the same id is another grant.
    const otherTenant = { ...useOf({ approval_id: first.approval_id }), tenant_id: 'tenant-b' };
    expect(await ledger.useGrant(otherTenant)).toEqual(otherTenant);
    const noTenant = { ...useOf({ approval_id: first.approval_id }), tenant_id: null };
    expect(await ledger.useGrant(noTenant)).toEqual(noTenant);
  });

  it('purgeExpired forgets uses whose grant expired, and only those', async () => {
    const ledger = await fresh();
    const expiring = useOf({ expires_at: T0 + 10 });
    const live = useOf({ expires_at: T0 + 1000 });
    await ledger.useGrant(expiring);
    await ledger.useGrant(live);
    await ledger.purgeExpired(T0 + 10);
    const again = { ...expiring, idempotency_key: unique('later'), action_id: unique('act') };
    expect(await ledger.useGrant(again)).toEqual(again);
    expect(await ledger.useGrant({ ...live, idempotency_key: unique('later') })).toEqual(live);
  });
});

/** A SQL store at schema version 3 (before tenant-scoped bindings), with one binding per tenant shape. */
async function upgradeCase(exec: (sql: string) => Promise<void>, open: () => RunLedger): Promise<void> {
  for (const migration of MIGRATIONS.filter((m) => m.version <= 3)) {
    for (const statement of migration.statements) await exec(statement);
  }
  await exec(`CREATE TABLE IF NOT EXISTS ledger_schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`);
  await exec(`INSERT INTO ledger_schema_migrations VALUES (1, ${T0}), (2, ${T0}), (3, ${T0})`);
  await exec(`INSERT INTO run_bindings VALUES ('act_old_a', 'cap:hermes_agent:local:run_start', 'local', 'tenant-a', 'run_old_a', 'run_old_a', NULL,
    ${T0}, ${T0}, 'running', NULL, 0)`);
  await exec(`INSERT INTO run_bindings VALUES ('act_old_none', 'cap:hermes_agent:local:run_start', 'local', NULL, 'run_old_none', 'run_old_none', NULL,
    ${T0}, ${T0}, 'completed', 'run.completed', 0)`);
  const ledger = open();
  try {
    expect(await ledger.evidence('act_old_a', 'tenant-a')).toMatchObject({ run_id: 'run_old_a', tenant_id: 'tenant-a', last_status: 'running' });
    expect(await ledger.evidence('act_old_none', null)).toMatchObject({ run_id: 'run_old_none', tenant_id: null, terminal_event: 'run.completed' });
    // After the upgrade another tenant can bind the same action id.
    const b = bindingOf({ action_id: 'act_old_a', tenant_id: 'tenant-b' });
    await ledger.recordRun(b);
    expect(await ledger.evidence('act_old_a', 'tenant-b')).toEqual(b);
    expect(await ledger.evidence('act_old_a', 'tenant-a')).toMatchObject({ run_id: 'run_old_a' });
    expect((await ledger.openRuns()).map((run) => run.action_id).sort()).toEqual(['act_old_a', 'act_old_a']);
  } finally {
    await ledger.close();
  }
}

describeSchemaUpgrade('an existing ledger at schema version 3 upgrades to per-tenant bindings, keeping its rows', upgradeCase);

describe('the memory ledger is bounded', () => {
  it('keeps at most maxRuns bindings, dropping the oldest recorded first', async () => {
    const ledger = createMemoryLedger({ maxRuns: 3 });
    const bindings = Array.from({ length: 5 }, (_, index) => bindingOf({ created_at: T0 + index, updated_at: T0 + index }));
    for (const binding of bindings) await ledger.recordRun(binding);
    const kept = await Promise.all(bindings.map((binding) => ledger.evidence(binding.action_id, 'tenant-a')));
    expect(kept).toEqual([null, null, ...bindings.slice(2)]);
    expect(await ledger.evidence(bindings[0]!.run_id)).toBeNull();
  });

  it('purgeExpired drops bindings and finished jobs not updated within retentionMs', async () => {
    const ledger = createMemoryLedger({ retentionMs: 1000 });
    const old = bindingOf();
    const touched = bindingOf();
    const recent = bindingOf({ created_at: T0 + 500, updated_at: T0 + 500 });
    for (const binding of [old, touched, recent]) await ledger.recordRun(binding);
    await ledger.updateRun(refOf(touched), { updated_at: T0 + 600 });
    const job = {
      session_id: 's',
      tool_use_id: 't',
      tool_name: 'n',
      tool_input: {},
      action_id: 'a',
      idempotency_key: 'k',
      run_id: null,
      state: 'done' as const,
      kickoff: 'accepted' as const,
      kickoff_event_id: null,
      final_status: 'completed' as const,
      final_event_id: null,
      created_at: T0,
      updated_at: T0,
      lease_owner: null,
      lease_expires_at: null,
    };
    await ledger.createJob(job);
    await ledger.createJob({ ...job, tool_use_id: 'live', state: 'running', final_status: null });

    await ledger.purgeExpired(T0 + 1000);
    expect(await ledger.evidence(old.action_id, 'tenant-a')).toBeNull();
    expect(await ledger.evidence(touched.action_id, 'tenant-a')).not.toBeNull();
    expect(await ledger.evidence(recent.action_id, 'tenant-a')).not.toBeNull();
    expect(await ledger.job('s', 't')).toBeNull();
    expect(await ledger.job('s', 'live')).not.toBeNull();
  });

  it.each([0, -1, 1.5, Number.NaN])('refuses maxRuns / retentionMs of %s with invalid_ledger', (value) => {
    for (const options of [{ maxRuns: value }, { retentionMs: value }]) {
      let error: unknown;
      try {
        createMemoryLedger(options);
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(ConnectorConfigError);
      expect((error as ConnectorConfigError).code).toBe('invalid_ledger');
    }
  });
});
