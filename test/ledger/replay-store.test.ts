/**
 * The connector host's replay store in the run ledger (claimMessage, purged by purgeExpired):
 * the same cases on every backend, concurrent claims from two replicas over one store, a
 * restart, and the upgrade of existing SQL ledgers (from v4).
 */
import { describe, expect, it } from 'vitest';
import type { ApprovalImport, RunLedger } from 'aip-connector-hermes-agent';
import { MIGRATIONS } from '../../src/ledger/migrations.js';
import { DURABLE_BACKENDS, LEDGER_BACKENDS } from '../helpers/ledgers.js';
import { describeSchemaUpgrade } from '../helpers/schema-upgrade.js';
import { INSPECTABLE_BACKENDS } from '../helpers/ledger-stores.js';

const T0 = 1_800_000_000_000;
const WINDOW = 300_000;

let counter = 0;
const messageId = () => `msg_${process.pid.toString(16).padStart(8, '0')}${(++counter).toString(16).padStart(24, '0')}`;

describe.each(LEDGER_BACKENDS)('replay store: $name', (backend) => {
  const fresh = async () => (await backend.create()).ledger;

  it('the first claim of a message id is true; every later claim while it lives is false; another id is its own claim', async () => {
    const ledger = await fresh();
    const id = messageId();
    expect(await ledger.claimMessage({ message_id: id, expires_at: T0 + WINDOW }, T0)).toBe(true);
    expect(await ledger.claimMessage({ message_id: id, expires_at: T0 + WINDOW }, T0)).toBe(false);
    expect(await ledger.claimMessage({ message_id: id, expires_at: T0 + 2 * WINDOW }, T0 + WINDOW - 1)).toBe(false);
    expect(await ledger.claimMessage({ message_id: messageId(), expires_at: T0 + WINDOW }, T0)).toBe(true);
  });

  it('from its expires_at on, an id may be claimed again, and the new claim has the new expiry', async () => {
    const ledger = await fresh();
    const id = messageId();
    await ledger.claimMessage({ message_id: id, expires_at: T0 + 10 }, T0);
    expect(await ledger.claimMessage({ message_id: id, expires_at: T0 + 1000 }, T0 + 10)).toBe(true);
    expect(await ledger.claimMessage({ message_id: id, expires_at: T0 + 5000 }, T0 + 999)).toBe(false);
  });

  it('purgeExpired forgets the claims whose expiry passed, and only those', async () => {
    const ledger = await fresh();
    const expiring = { message_id: messageId(), expires_at: T0 + 10 };
    const live = { message_id: messageId(), expires_at: T0 + 1000 };
    await ledger.claimMessage(expiring, T0);
    await ledger.claimMessage(live, T0);
    await ledger.purgeExpired(T0 + 10);
    // Asked as of T0 + 5, a claim that still existed would be live: only a purged one can be claimed.
    expect(await ledger.claimMessage(expiring, T0 + 5)).toBe(true);
    expect(await ledger.claimMessage(live, T0 + 5)).toBe(false);
  });

  it('20 concurrent claims of one id from two ledgers over the same store: exactly one is true', async () => {
    const store = await backend.create();
    const second = store.open();
    const id = messageId();
    const claims = Array.from({ length: 20 }, (_, index) => (index % 2 ? second : store.ledger).claimMessage({ message_id: id, expires_at: T0 + WINDOW }, T0));
    expect((await Promise.all(claims)).filter(Boolean)).toHaveLength(1);
  });

  it('20 concurrent claims over an expired claim, from two ledgers: exactly one takes it over', async () => {
    const store = await backend.create();
    const second = store.open();
    const id = messageId();
    await store.ledger.claimMessage({ message_id: id, expires_at: T0 }, T0 - 1);
    const claims = Array.from({ length: 20 }, (_, index) =>
      (index % 2 ? second : store.ledger).claimMessage({ message_id: id, expires_at: T0 + WINDOW }, T0 + 1),
    );
    expect((await Promise.all(claims)).filter(Boolean)).toHaveLength(1);
  });
});

describe.each(LEDGER_BACKENDS)('imported approval records: $name', (backend) => {
  const importOf = (overrides: Partial<ApprovalImport> = {}): ApprovalImport => ({
    tenant_id: 'tenant-a',
    approval_id: `apr_${messageId().slice(4)}`,
    digest: 'sha256:'.padEnd(71, 'a'),
    imported_at: T0,
    expires_at: T0 + WINDOW,
    ...overrides,
  });

  it('the first record under an approval id stands: the same one and a different one both get it back', async () => {
    const ledger = (await backend.create()).ledger;
    const first = importOf();
    expect(await ledger.importApproval(first)).toEqual(first);
    expect(await ledger.importApproval({ ...first, imported_at: T0 + 5 })).toEqual(first);
    expect(await ledger.importApproval({ ...first, digest: 'sha256:'.padEnd(71, 'b') })).toEqual(first);
    // Another tenant's approval with the same id is another record.
    const other = { ...first, tenant_id: 'tenant-b', digest: 'sha256:'.padEnd(71, 'c') };
    expect(await ledger.importApproval(other)).toEqual(other);
  });

  it('purgeExpired forgets the records whose expiry passed, and only those', async () => {
    const ledger = (await backend.create()).ledger;
    const expiring = importOf({ expires_at: T0 + 10 });
    const live = importOf({ expires_at: T0 + 1000 });
    await ledger.importApproval(expiring);
    await ledger.importApproval(live);
    await ledger.purgeExpired(T0 + 10);
    const changed = (record: ApprovalImport) => ({ ...record, digest: 'sha256:'.padEnd(71, 'd') });
    expect(await ledger.importApproval(changed(expiring))).toEqual(changed(expiring));
    expect(await ledger.importApproval(changed(live))).toEqual(live);
  });
});

describe.each(DURABLE_BACKENDS)('replay store across a restart: $name', (backend) => {
  it('a ledger opened after the first one closed still refuses the id', async () => {
    const store = await backend.create();
    const id = messageId();
    expect(await store.ledger.claimMessage({ message_id: id, expires_at: T0 + WINDOW }, T0)).toBe(true);
    await store.ledger.close();
    expect(await store.open().claimMessage({ message_id: id, expires_at: T0 + WINDOW }, T0 + 1)).toBe(false);
  });
});

describe.each(INSPECTABLE_BACKENDS)('replay store rows: $name', (backend) => {
  it('a claim is one row of (message_id, expires_at); purging deletes it', async () => {
    const store = await backend.create();
    const ledger = store.open();
    const id = messageId();
    await ledger.claimMessage({ message_id: id, expires_at: T0 + 10 }, T0);
    const rows = async () =>
      (await store.query('SELECT message_id, expires_at FROM replay_messages')).map((row) => ({ id: row.message_id, at: Number(row.expires_at) }));
    expect(await rows()).toEqual([{ id, at: T0 + 10 }]);
    await ledger.purgeExpired(T0 + 10);
    expect(await rows()).toEqual([]);
  });
});

/** A SQL store at schema version 4 (before the replay store), with an idempotency record in it. */
async function upgradeCase(exec: (sql: string) => Promise<void>, open: () => RunLedger): Promise<void> {
  for (const migration of MIGRATIONS.filter((m) => m.version <= 4)) {
    for (const statement of migration.statements) await exec(statement);
  }
  await exec('CREATE TABLE IF NOT EXISTS ledger_schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)');
  await exec(`INSERT INTO ledger_schema_migrations VALUES (1, ${T0}), (2, ${T0}), (3, ${T0}), (4, ${T0})`);
  await exec(`INSERT INTO idempotency_records VALUES ('cap:hermes_agent:local:run_start', 'key-old', 'fp', 'act_old', 'in_flight', NULL, 'owner',
    ${T0 + 1000}, ${T0}, ${T0 + 86_400_000})`);
  const ledger = open();
  try {
    const id = messageId();
    expect(await ledger.claimMessage({ message_id: id, expires_at: T0 + WINDOW }, T0)).toBe(true);
    expect(await ledger.claimMessage({ message_id: id, expires_at: T0 + WINDOW }, T0)).toBe(false);
    expect(await ledger.get({ capability_id: 'cap:hermes_agent:local:run_start', idempotency_key: 'key-old' }, T0)).toMatchObject({ action_id: 'act_old' });
  } finally {
    await ledger.close();
  }
}

describeSchemaUpgrade('an existing ledger at schema version 4 gains the replay store, keeping its rows', upgradeCase);
