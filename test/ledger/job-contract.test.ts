/**
 * The bridge's job records on every ledger backend: create once per (tenant, session, tool use),
 * COALESCE updates, unfinished jobs oldest first, and the job lease that keeps one bridge's
 * live job away from another bridge's recover() until the lease expires; the upgrades of older schemas.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createSqliteLedger, type BridgeJob, type RunLedger } from 'aip-connector-hermes-agent';
import { JOB_LEASE, JOB_T0, jobOf } from '../helpers/bridge-jobs.js';
import { LEDGER_BACKENDS } from '../helpers/ledgers.js';
import { describeSchemaUpgrade } from '../helpers/schema-upgrade.js';
import { MIGRATIONS } from '../../src/ledger/migrations.js';

const T0 = JOB_T0;
const LEASE = JOB_LEASE;

describe.each(LEDGER_BACKENDS)('job records: $name', (backend) => {
  const fresh = async (): Promise<RunLedger> => (await backend.create()).ledger;
  const claim = (ledger: RunLedger, job: BridgeJob, owner: string, now: number) => ledger.claimJob(job.session_id, job.tool_use_id, owner, now, now + LEASE);

  it('createJob stores the job once per (session, tool use); job() returns exactly it', async () => {
    const ledger = await fresh();
    const job = jobOf();
    expect(await ledger.createJob(job)).toBe(true);
    expect(await ledger.createJob({ ...job, action_id: 'herm_other', lease_owner: 'bridge-b' })).toBe(false);
    expect(await ledger.job(job.session_id, job.tool_use_id)).toEqual(job);
    expect(await ledger.job(job.session_id, 'toolu_unknown')).toBeNull();
  });

  it('a job given without tenant_id is stored for no tenant, and read back with tenant_id null', async () => {
    const ledger = await fresh();
    const { tenant_id: _, ...job } = jobOf();
    expect(await ledger.createJob(job)).toBe(true);
    expect(await ledger.job(job.session_id, job.tool_use_id, null)).toEqual({ ...job, tenant_id: null });
    expect(await ledger.job(job.session_id, job.tool_use_id, 'tenant-a')).toBeNull();
  });

  it("jobs are per tenant: the same (session, tool use) in two tenants are two jobs, and each method sees only its tenant's", async () => {
    const ledger = await fresh();
    const a = jobOf({ tenant_id: 'tenant-a', lease_owner: null, lease_expires_at: null });
    const b = { ...a, tenant_id: 'tenant-b', action_id: 'herm_b', tool_input: { prompt: 'B' } };
    expect(await ledger.createJob(a)).toBe(true);
    expect(await ledger.createJob(b)).toBe(true);
    expect(await ledger.createJob({ ...a, action_id: 'herm_again' })).toBe(false);
    expect(await ledger.job(a.session_id, a.tool_use_id, 'tenant-a')).toEqual(a);
    expect(await ledger.job(a.session_id, a.tool_use_id, 'tenant-b')).toEqual(b);
    expect(await ledger.job(a.session_id, a.tool_use_id)).toBeNull();
    expect(await ledger.unfinishedJobs()).toEqual([]);
    expect(await ledger.unfinishedJobs('tenant-b')).toEqual([b]);

    expect(await ledger.claimJob(a.session_id, a.tool_use_id, 'bridge-a', T0, T0 + LEASE, 'tenant-a')).toMatchObject({
      tenant_id: 'tenant-a',
      lease_owner: 'bridge-a',
    });
    expect(await ledger.renewJobLease(a.session_id, a.tool_use_id, 'bridge-a', T0 + 2 * LEASE, 'tenant-b')).toBe(false);
    expect(await ledger.renewJobLease(a.session_id, a.tool_use_id, 'bridge-a', T0 + 2 * LEASE, 'tenant-a')).toBe(true);
    await ledger.updateJob(a.session_id, a.tool_use_id, { updated_at: T0 + 5, state: 'done', final_status: 'completed' }, 'tenant-a');
    expect(await ledger.job(a.session_id, a.tool_use_id, 'tenant-b')).toEqual(b);
    expect(await ledger.unfinishedJobs('tenant-a')).toEqual([]);
    expect(await ledger.claimJob(b.session_id, b.tool_use_id, 'bridge-b', T0, T0 + LEASE, 'tenant-b')).toMatchObject({
      tenant_id: 'tenant-b',
      state: 'starting',
    });
  });

  it('updateJob changes only the fields given; unfinishedJobs lists the jobs not done, oldest first', async () => {
    const ledger = await fresh();
    const [first, second, third] = [jobOf(), jobOf(), jobOf()] as [BridgeJob, BridgeJob, BridgeJob];
    for (const job of [third, first, second]) await ledger.createJob(job);
    await ledger.updateJob(first.session_id, first.tool_use_id, { updated_at: T0 + 100, run_id: 'run_1', state: 'running' });
    await ledger.updateJob(second.session_id, second.tool_use_id, { updated_at: T0 + 101, state: 'done', final_status: 'completed', final_event_id: 'evt_1' });
    expect(await ledger.job(first.session_id, first.tool_use_id)).toEqual({ ...first, updated_at: T0 + 100, run_id: 'run_1', state: 'running' });
    expect((await ledger.unfinishedJobs()).map((job) => job.tool_use_id)).toEqual([first.tool_use_id, third.tool_use_id]);
  });

  it('claimJob refuses a job whose lease another owner still holds, and leaves it unchanged', async () => {
    const ledger = await fresh();
    const job = jobOf();
    await ledger.createJob(job);
    expect(await claim(ledger, job, 'bridge-b', (job.lease_expires_at as number) - 1)).toBeNull();
    expect(await ledger.job(job.session_id, job.tool_use_id)).toEqual(job);
  });

  it('claimJob takes a job whose lease expired, or that has none, and returns it as stored', async () => {
    const ledger = await fresh();
    const expired = jobOf();
    const unleased = jobOf({ lease_owner: null, lease_expires_at: null });
    await ledger.createJob(expired);
    await ledger.createJob(unleased);
    const now = expired.lease_expires_at as number;
    expect(await claim(ledger, expired, 'bridge-b', now)).toEqual({ ...expired, lease_owner: 'bridge-b', lease_expires_at: now + LEASE });
    expect(await claim(ledger, unleased, 'bridge-b', T0)).toEqual({ ...unleased, lease_owner: 'bridge-b', lease_expires_at: T0 + LEASE });
    // The previous owner's lease is gone: it cannot renew it any more.
    expect(await ledger.renewJobLease(expired.session_id, expired.tool_use_id, 'bridge-a', now + 2 * LEASE)).toBe(false);
  });

  it('claimJob by the owner itself succeeds at any time (a replica restarted with the same id)', async () => {
    const ledger = await fresh();
    const job = jobOf();
    await ledger.createJob(job);
    expect(await claim(ledger, job, 'bridge-a', T0)).toMatchObject({ lease_owner: 'bridge-a', lease_expires_at: T0 + LEASE });
  });

  it('claimJob never takes a done job or an unknown one', async () => {
    const ledger = await fresh();
    const job = jobOf({ lease_owner: null, lease_expires_at: null });
    await ledger.createJob(job);
    await ledger.updateJob(job.session_id, job.tool_use_id, { updated_at: T0 + 5, state: 'done' });
    expect(await claim(ledger, job, 'bridge-b', T0 + 10)).toBeNull();
    expect(await ledger.claimJob('sesn_unknown', 'toolu_unknown', 'bridge-b', T0, T0 + LEASE)).toBeNull();
  });

  it("renewJobLease extends only the owner's lease; an expiry at now gives the job up", async () => {
    const ledger = await fresh();
    const job = jobOf();
    await ledger.createJob(job);
    expect(await ledger.renewJobLease(job.session_id, job.tool_use_id, 'bridge-b', T0 + 10 * LEASE)).toBe(false);
    expect(await ledger.renewJobLease(job.session_id, job.tool_use_id, 'bridge-a', T0 + 10 * LEASE)).toBe(true);
    expect((await ledger.job(job.session_id, job.tool_use_id))?.lease_expires_at).toBe(T0 + 10 * LEASE);
    expect(await claim(ledger, job, 'bridge-b', T0 + 9 * LEASE)).toBeNull();
    // Released (expiry set to now): another bridge may take it right away.
    expect(await ledger.renewJobLease(job.session_id, job.tool_use_id, 'bridge-a', T0 + 100)).toBe(true);
    expect(await claim(ledger, job, 'bridge-b', T0 + 100)).toMatchObject({ lease_owner: 'bridge-b' });
  });

  it('two bridges racing for one expired job: exactly one gets it', async () => {
    const store = await backend.create();
    const job = jobOf({ lease_expires_at: T0 });
    await store.ledger.createJob(job);
    const other = store.open();
    const results = await Promise.all([claim(store.ledger, job, 'bridge-b', T0 + 1), claim(other, job, 'bridge-c', T0 + 1)]);
    expect(results.filter((result) => result !== null)).toHaveLength(1);
    const owner = (await store.ledger.job(job.session_id, job.tool_use_id))?.lease_owner;
    expect(owner).toBe(results[0] ? 'bridge-b' : 'bridge-c');
  });
});

describe('a SQLite ledger written before job leases existed (schema version 2)', () => {
  it('upgrades to version 3 keeping its jobs, which have no lease and can be claimed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'aip-ledger-v2-'));
    const path = join(dir, 'ledger.db');
    try {
      const db = new Database(path);
      for (const migration of MIGRATIONS.filter((m) => m.version <= 2)) for (const statement of migration.statements) db.exec(statement);
      db.exec(`CREATE TABLE ledger_schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL);
        INSERT INTO ledger_schema_migrations VALUES (1, ${T0}), (2, ${T0});
        INSERT INTO herm_jobs VALUES ('sesn_old', 'toolu_old', 'hermes_run', '{"prompt":"Render"}', 'herm_old', 'herm-key-old',
          'run_old', 'running', 'accepted', 'evt_k', NULL, NULL, ${T0}, ${T0});`);
      db.close();
      const ledger = createSqliteLedger({ path });
      const old = await ledger.job('sesn_old', 'toolu_old');
      expect(old).toMatchObject({ run_id: 'run_old', state: 'running', tool_input: { prompt: 'Render' }, lease_owner: null, lease_expires_at: null });
      expect(await ledger.claimJob('sesn_old', 'toolu_old', 'bridge-a', T0, T0 + LEASE)).toMatchObject({ lease_owner: 'bridge-a' });
      await ledger.close();
      const check = new Database(path, { readonly: true });
      expect(check.prepare('SELECT version FROM ledger_schema_migrations ORDER BY version').all()).toEqual(MIGRATIONS.map(({ version }) => ({ version })));
      check.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** A SQL store at schema version 4 (jobs not yet per tenant), with jobs whose action ids one, two or no tenants bound. */
async function tenantUpgradeCase(exec: (sql: string) => Promise<void>, open: () => RunLedger): Promise<void> {
  for (const migration of MIGRATIONS.filter((m) => m.version <= 4)) for (const statement of migration.statements) await exec(statement);
  await exec('CREATE TABLE IF NOT EXISTS ledger_schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)');
  await exec(`INSERT INTO ledger_schema_migrations VALUES (1, ${T0}), (2, ${T0}), (3, ${T0}), (4, ${T0})`);
  const bind = (tenant: string | null, actionId: string) =>
    exec(`INSERT INTO run_bindings VALUES ('${tenant ?? ''}', '${actionId}', 'cap:hermes_agent:local:run_start', 'local', ${tenant === null ? 'NULL' : `'${tenant}'`},
      'run_${tenant}_${actionId}', 'sesn', NULL, ${T0}, ${T0}, 'running', NULL, 0)`);
  await bind('tenant-a', 'herm_a');
  await bind(null, 'herm_none');
  await bind('tenant-a', 'herm_both');
  await bind('tenant-b', 'herm_both');
  for (const [toolUseId, actionId] of [
    ['toolu_a', 'herm_a'],
    ['toolu_none', 'herm_none'],
    ['toolu_unbound', 'herm_unbound'],
    ['toolu_both', 'herm_both'],
  ]) {
    await exec(`INSERT INTO herm_jobs VALUES ('sesn_old', '${toolUseId}', 'hermes_run', '{"prompt":"Render"}', '${actionId}', 'key-${toolUseId}',
      NULL, 'starting', 'pending', NULL, NULL, NULL, ${T0}, ${T0}, 'bridge-old', ${T0 + LEASE})`);
  }
  const ledger = open();
  try {
    expect(await ledger.job('sesn_old', 'toolu_a', 'tenant-a')).toMatchObject({ tenant_id: 'tenant-a', action_id: 'herm_a', lease_owner: 'bridge-old' });
    expect(await ledger.job('sesn_old', 'toolu_a')).toBeNull();
    expect((await ledger.unfinishedJobs('tenant-a')).map((job) => job.tool_use_id)).toEqual(['toolu_a']);
    // No binding, or bindings of two tenants: the job's tenant is not known, and it stays a job of no tenant.
    expect((await ledger.unfinishedJobs()).map((job) => job.tool_use_id).sort()).toEqual(['toolu_both', 'toolu_none', 'toolu_unbound']);
    expect(await ledger.unfinishedJobs('tenant-b')).toEqual([]);
    // After the upgrade another tenant can have a job with the same ids.
    expect(await ledger.createJob(jobOf({ tenant_id: 'tenant-b', session_id: 'sesn_old', tool_use_id: 'toolu_a' }))).toBe(true);
    expect(await ledger.job('sesn_old', 'toolu_a', 'tenant-a')).toMatchObject({ action_id: 'herm_a' });
  } finally {
    await ledger.close();
  }
}

describeSchemaUpgrade('an existing ledger at schema version 4 upgrades to per-tenant jobs, keeping its jobs', tenantUpgradeCase);
