/**
 * The bridge's job records on every ledger backend: create once per (session, tool use),
 * COALESCE updates, unfinished jobs oldest first, and the job lease that keeps one bridge's
 * live job away from another bridge's recover() until the lease expires.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createSqliteLedger, type BridgeJob, type RunLedger } from 'aip-connector-hermes-agent';
import { LEDGER_BACKENDS } from '../helpers/ledgers.js';
import { MIGRATIONS } from '../../src/ledger/migrations.js';

const T0 = 1_800_000_000_000;
const LEASE = 30_000;
let counter = 0;

function jobOf(overrides: Partial<BridgeJob> = {}): BridgeJob {
  const n = ++counter;
  return {
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
    created_at: T0 + n,
    updated_at: T0 + n,
    lease_owner: 'bridge-a',
    lease_expires_at: T0 + n + LEASE,
    ...overrides,
  };
}

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
