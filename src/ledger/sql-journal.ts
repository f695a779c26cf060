import type { HermesSseEvent } from '../contract/aip.js';
import type { EventsLost, JournalDeliveries, JournalKey, JournalRecord, JournalScope, JournalState, JournalStore } from '../journal/types.js';
import type { SqlStatement } from './group-commit.js';
import type { JournalTail } from './journal-tail.js';
import { tenantScope } from './migrations.js';
import { numOrNull, strOrNull } from './sql-values.js';

type Row = Record<string, unknown>;

/** The SQL ledger's statements, once its schema is ready. */
export interface JournalSql {
  all(sql: string, params: unknown[]): Promise<Row[]>;
  run(sql: string, params: unknown[]): Promise<number>;
  runTogether(unit: SqlStatement[]): Promise<number[]>;
}

const COLUMNS =
  'tenant_id, endpoint_id, run_id, state, owner, lease_expires_at, next_sequence, last_hermes_seq, bytes, events_lost, created_at, closed_at, close_reason';
/** The condition on a run's key (journals, their events, their deliveries), and its parameters. */
export const KEY = 'tenant_scope = ? AND endpoint_id = ? AND run_id = ?';
export const keyParams = (key: JournalKey) => [tenantScope(key.tenant_id), key.endpoint_id, key.run_id];
const OWNED = `${KEY} AND owner = ? AND state = 'following'`;

/** The topic readers of a journal subscribe to: the key itself (at most ~1.2 kB, under NOTIFY's 8 kB). */
export const journalTopic = (key: JournalKey): string => JSON.stringify([tenantScope(key.tenant_id), key.endpoint_id, key.run_id]);

/** Run journals over the SQL ledger's tables and group commit (both SQLite and PostgreSQL). */
export function createSqlJournal(db: () => Promise<JournalSql>, tail: JournalTail): JournalStore {
  /** Commits a change of the journal with its announcement, then tells this process's readers. */
  const change = async (key: JournalKey, statements: SqlStatement[]): Promise<number[]> => {
    const topic = journalTopic(key);
    const announcement = tail.announce(topic);
    const changes = await (await db()).runTogether(announcement ? [...statements, announcement] : statements);
    if ((changes[0] ?? 0) > 0) tail.committed(topic);
    return changes;
  };

  return {
    async create(key, owner, now, leaseExpiresAt, deliveries) {
      const [created] = await change(key, [
        {
          sql: `INSERT INTO run_journals (tenant_scope, ${COLUMNS}) VALUES (?, ?, ?, ?, 'following', ?, ?, 1, NULL, 0, '[]', ?, NULL, NULL)
                ON CONFLICT (tenant_scope, endpoint_id, run_id) DO NOTHING`,
          params: [tenantScope(key.tenant_id), key.tenant_id, key.endpoint_id, key.run_id, owner, leaseExpiresAt, now],
        },
        ...(deliveries?.targetIds ?? []).map((targetId) => createDelivery(key, targetId, deliveries as JournalDeliveries, now)),
      ]);
      return (created ?? 0) > 0;
    },
    async journal(key) {
      const rows = await (await db()).all(`SELECT ${COLUMNS} FROM run_journals WHERE ${KEY}`, keyParams(key));
      return rows[0] ? toJournal(rows[0]) : null;
    },
    async journaledForAnotherTenant(key) {
      const rows = await (await db()).all('SELECT 1 AS found FROM run_journals WHERE endpoint_id = ? AND run_id = ? AND tenant_scope <> ? LIMIT 1', [
        key.endpoint_id,
        key.run_id,
        tenantScope(key.tenant_id),
      ]);
      return rows.length > 0;
    },
    async append(key, owner, { entries, bytes, last_hermes_seq }) {
      const last = entries[entries.length - 1];
      if (!last) return true;
      const update = {
        sql: `UPDATE run_journals SET next_sequence = ?, bytes = bytes + ?, last_hermes_seq = COALESCE(?, last_hermes_seq) WHERE ${OWNED}`,
        params: [last.sequence + 1, bytes, last_hermes_seq, ...keyParams(key), owner],
      };
      // Each insert re-checks the ownership the update just asserted: a former owner's late append stores nothing.
      const inserts = entries.map(({ sequence, event }) => ({
        sql: `INSERT INTO run_journal_events (tenant_scope, endpoint_id, run_id, sequence, event)
              SELECT ?, ?, ?, CAST(? AS BIGINT), ? WHERE EXISTS (SELECT 1 FROM run_journals WHERE ${OWNED})
              ON CONFLICT (tenant_scope, endpoint_id, run_id, sequence) DO NOTHING`,
        params: [...keyParams(key), sequence, JSON.stringify(event), ...keyParams(key), owner],
      }));
      // Queued in the same transaction as the events: an event is never journaled without being queued.
      const queue = {
        sql: `UPDATE run_deliveries SET queued_through = ? WHERE ${KEY} AND state = 'pending' AND queued_through < ?
              AND EXISTS (SELECT 1 FROM run_journals WHERE ${OWNED})`,
        params: [last.sequence, ...keyParams(key), last.sequence, ...keyParams(key), owner],
      };
      const [updated] = await change(key, [update, ...inserts, queue]);
      return (updated ?? 0) > 0;
    },
    async recordLoss(key, owner, lost) {
      const [updated] = await change(key, [
        { sql: `UPDATE run_journals SET events_lost = ? WHERE ${OWNED}`, params: [JSON.stringify(lost), ...keyParams(key), owner] },
      ]);
      return (updated ?? 0) > 0;
    },
    async close(key, owner, { state, reason, now }) {
      const [closed] = await change(key, [
        {
          sql: `UPDATE run_journals SET state = ?, close_reason = ?, closed_at = ?, owner = NULL, lease_expires_at = NULL WHERE ${OWNED}`,
          params: [state, reason, now, ...keyParams(key), owner],
        },
      ]);
      return (closed ?? 0) > 0;
    },
    async renewOwned(owner, leaseExpiresAt) {
      await (await db()).run(`UPDATE run_journals SET lease_expires_at = ? WHERE owner = ? AND state = 'following'`, [leaseExpiresAt, owner]);
    },
    async takeOver(owner, now, leaseExpiresAt, limit, scopes) {
      if (scopes.length === 0) return [];
      const sql = await db();
      const within = scoped(scopes);
      const expired = await sql.all(
        `SELECT ${COLUMNS} FROM run_journals WHERE state = 'following' AND lease_expires_at <= ? AND (${within.sql})
         ORDER BY lease_expires_at LIMIT ?`,
        [now, ...within.params, limit],
      );
      const taken: JournalRecord[] = [];
      for (const candidate of expired.map(toJournal)) {
        // Compare-and-set on the lease read: of several replicas sweeping at once, one takes each journal.
        const changed = await sql.run(
          `UPDATE run_journals SET owner = ?, lease_expires_at = ? WHERE ${KEY} AND state = 'following' AND lease_expires_at = ? AND owner IS NOT DISTINCT FROM ?`,
          [owner, leaseExpiresAt, ...keyParams(candidate), candidate.lease_expires_at, candidate.owner],
        );
        if (changed > 0) taken.push({ ...candidate, owner, lease_expires_at: leaseExpiresAt });
      }
      return taken;
    },
    async events(key, afterSequence, limit) {
      const rows = await (await db()).all(`SELECT sequence, event FROM run_journal_events WHERE ${KEY} AND sequence > ? ORDER BY sequence LIMIT ?`, [
        ...keyParams(key),
        afterSequence,
        limit,
      ]);
      return rows.map((row) => ({ sequence: Number(row.sequence), event: JSON.parse(String(row.event)) as HermesSseEvent }));
    },
    async totalBytes() {
      const rows = await (await db()).all('SELECT COALESCE(SUM(bytes), 0) AS total FROM run_journals', []);
      return Number(rows[0]?.total ?? 0);
    },
    async purge(closedBefore, scopes, now) {
      if (scopes.length === 0) return 0;
      const sql = await db();
      const within = scoped(scopes);
      const closed = await sql.all(
        `SELECT tenant_scope, endpoint_id, run_id FROM run_journals WHERE state <> 'following' AND closed_at <= ? AND (${within.sql})`,
        [closedBefore, ...within.params],
      );
      for (const row of closed) {
        const params = [row.tenant_scope, row.endpoint_id, row.run_id];
        await sql.runTogether([
          // The events a delivery still needs go with the journal: the delivery is given up, with that as its evidence.
          {
            sql: `UPDATE run_deliveries SET state = 'given_up', given_up_reason = 'retention', last_error = ?, owner = NULL, lease_expires_at = NULL,
                    updated_at = ? WHERE ${KEY} AND state = 'pending'`,
            params: ['the journal was purged (retentionMs) before these events were delivered', now, ...params],
          },
          { sql: `DELETE FROM run_journal_events WHERE ${KEY}`, params },
          { sql: `DELETE FROM run_journals WHERE ${KEY} AND state <> 'following'`, params },
        ]);
      }
      await sql.run(`DELETE FROM run_deliveries WHERE state <> 'pending' AND updated_at <= ? AND (${within.sql})`, [closedBefore, ...within.params]);
      return closed.length;
    },
    subscribe: (key, onChange) => tail.subscribe(journalTopic(key), onChange),
  };
}

/**
 * A delivery row created with its journal: held by the deliverer, or given up at once (`outbox_full`)
 * when its target already has `maxPendingPerTarget` pending ones (the start is never held up by the bound).
 */
function createDelivery(key: JournalKey, targetId: string, deliveries: JournalDeliveries, now: number): SqlStatement {
  return {
    sql: `INSERT INTO run_deliveries (tenant_scope, tenant_id, endpoint_id, run_id, target_id, state, owner, lease_expires_at, delivered_through,
            queued_through, attempts, next_attempt_at, first_failure_at, last_error, given_up_reason, created_at, updated_at)
          SELECT ?, ?, ?, ?, ?, CASE WHEN bound.at_bound THEN 'given_up' ELSE 'pending' END, CASE WHEN bound.at_bound THEN NULL ELSE ? END,
            CASE WHEN bound.at_bound THEN NULL ELSE CAST(? AS BIGINT) END, 0, 0, 0, NULL, NULL,
            CASE WHEN bound.at_bound THEN 'the outbox held maxPendingPerTarget pending deliveries for this target' ELSE NULL END,
            CASE WHEN bound.at_bound THEN 'outbox_full' ELSE NULL END, CAST(? AS BIGINT), CAST(? AS BIGINT)
          FROM (SELECT COUNT(*) >= CAST(? AS BIGINT) AS at_bound FROM run_deliveries WHERE target_id = ? AND state = 'pending') bound WHERE true
          ON CONFLICT (tenant_scope, endpoint_id, run_id, target_id) DO NOTHING`,
    params: [
      tenantScope(key.tenant_id),
      key.tenant_id,
      key.endpoint_id,
      key.run_id,
      targetId,
      deliveries.owner,
      deliveries.leaseExpiresAt,
      now,
      now,
      deliveries.maxPendingPerTarget,
      targetId,
    ],
  };
}

/** The condition that selects journals (or deliveries) within `scopes` (at least one). */
export function scoped(scopes: readonly JournalScope[]): { sql: string; params: string[] } {
  const params: string[] = [];
  const conditions = scopes.map(({ endpoint_id, tenant_id }) => {
    params.push(endpoint_id);
    if (tenant_id === undefined) return 'endpoint_id = ?';
    params.push(tenantScope(tenant_id));
    return '(endpoint_id = ? AND tenant_scope = ?)';
  });
  return { sql: conditions.join(' OR '), params };
}

function toJournal(row: Row): JournalRecord {
  return {
    tenant_id: strOrNull(row.tenant_id),
    endpoint_id: String(row.endpoint_id),
    run_id: String(row.run_id),
    state: String(row.state) as JournalState,
    owner: strOrNull(row.owner),
    lease_expires_at: numOrNull(row.lease_expires_at),
    next_sequence: Number(row.next_sequence),
    last_hermes_seq: numOrNull(row.last_hermes_seq),
    bytes: Number(row.bytes),
    events_lost: JSON.parse(String(row.events_lost)) as EventsLost[],
    created_at: Number(row.created_at),
    closed_at: numOrNull(row.closed_at),
    close_reason: strOrNull(row.close_reason),
  };
}
