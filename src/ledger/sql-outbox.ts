import type { JournalKey } from '../journal/types.js';
import type { DeliveryRecord, DeliveryState, DeliveryStore, GiveUpReason } from '../outbox/types.js';
import { tenantScope } from './migrations.js';
import { type JournalSql, KEY, keyParams, scoped } from './sql-journal.js';
import { numOrNull, strOrNull } from './sql-values.js';

const COLUMNS =
  'tenant_id, endpoint_id, run_id, target_id, state, owner, lease_expires_at, delivered_through, queued_through, attempts, next_attempt_at, first_failure_at, last_error, given_up_reason, created_at, updated_at';
const DELIVERY = `${KEY} AND target_id = ?`;
const HELD = `${DELIVERY} AND owner = ? AND state = 'pending'`;
const heldParams = (key: JournalKey, targetId: string, owner: string) => [...keyParams(key), targetId, owner];

/** The outbox over the SQL ledger's tables and group commit (rows are created and queued by the journal store). */
export function createSqlOutbox(db: () => Promise<JournalSql>): DeliveryStore {
  return {
    async renewOwned(owner, leaseExpiresAt) {
      await (await db()).run(`UPDATE run_deliveries SET lease_expires_at = ? WHERE owner = ? AND state = 'pending'`, [leaseExpiresAt, owner]);
    },
    async takeOver(owner, now, leaseExpiresAt, limit, targetIds, scopes) {
      if (targetIds.length === 0 || scopes.length === 0) return [];
      const sql = await db();
      const within = scoped(scopes);
      const free = await sql.all(
        `SELECT ${COLUMNS} FROM run_deliveries WHERE target_id IN (${targetIds.map(() => '?').join(', ')}) AND state = 'pending'
           AND (lease_expires_at IS NULL OR lease_expires_at <= ?) AND (${within.sql}) ORDER BY created_at LIMIT ?`,
        [...targetIds, now, ...within.params, limit],
      );
      const taken: DeliveryRecord[] = [];
      for (const candidate of free.map(toDelivery)) {
        // Compare-and-set on the lease read: of several replicas sweeping at once, one takes each delivery.
        const changed = await sql.run(
          `UPDATE run_deliveries SET owner = ?, lease_expires_at = ? WHERE ${DELIVERY} AND state = 'pending'
             AND lease_expires_at IS NOT DISTINCT FROM ? AND owner IS NOT DISTINCT FROM ?`,
          [owner, leaseExpiresAt, ...keyParams(candidate), candidate.target_id, candidate.lease_expires_at, candidate.owner],
        );
        if (changed > 0) taken.push({ ...candidate, owner, lease_expires_at: leaseExpiresAt });
      }
      return taken;
    },
    async advance(key, targetId, owner, deliveredThrough, now) {
      const changed = await (await db()).run(
        `UPDATE run_deliveries SET delivered_through = ?, attempts = 0, next_attempt_at = NULL, first_failure_at = NULL, last_error = NULL, updated_at = ?
           WHERE ${HELD} AND delivered_through < ?`,
        [deliveredThrough, now, ...heldParams(key, targetId, owner), deliveredThrough],
      );
      return changed > 0;
    },
    async recordFailure(key, targetId, owner, failure) {
      const changed = await (await db()).run(
        `UPDATE run_deliveries SET attempts = ?, first_failure_at = ?, next_attempt_at = ?, last_error = ?, updated_at = ? WHERE ${HELD}`,
        [failure.attempts, failure.first_failure_at, failure.next_attempt_at, failure.last_error, failure.now, ...heldParams(key, targetId, owner)],
      );
      return changed > 0;
    },
    async finish(key, targetId, owner, end) {
      const givenUp = end.state === 'given_up' ? end : undefined;
      const changed = await (await db()).run(
        `UPDATE run_deliveries SET state = ?, given_up_reason = ?, last_error = COALESCE(?, last_error), next_attempt_at = NULL, owner = NULL,
           lease_expires_at = NULL, updated_at = ? WHERE ${HELD}`,
        [end.state, givenUp?.reason ?? null, givenUp?.lastError ?? null, end.now, ...heldParams(key, targetId, owner)],
      );
      return changed > 0;
    },
    async delivery(key, targetId) {
      const rows = await (await db()).all(`SELECT ${COLUMNS} FROM run_deliveries WHERE ${DELIVERY}`, [...keyParams(key), targetId]);
      return rows[0] ? toDelivery(rows[0]) : null;
    },
    async list({ run_id, tenant_id, target_id, state, limit }) {
      const conditions: string[] = [];
      const params: unknown[] = [];
      const where = (condition: string, value: unknown) => {
        conditions.push(condition);
        params.push(value);
      };
      if (run_id !== undefined) where('run_id = ?', run_id);
      if (tenant_id !== undefined) where('tenant_scope = ?', tenantScope(tenant_id));
      if (target_id !== undefined) where('target_id = ?', target_id);
      if (state !== undefined) where('state = ?', state);
      const filter = conditions.length === 0 ? '' : `WHERE ${conditions.join(' AND ')}`;
      const rows = await (await db()).all(`SELECT ${COLUMNS} FROM run_deliveries ${filter} ORDER BY created_at DESC, run_id, target_id LIMIT ?`, [
        ...params,
        limit,
      ]);
      return rows.map(toDelivery);
    },
  };
}

function toDelivery(row: Record<string, unknown>): DeliveryRecord {
  return {
    tenant_id: strOrNull(row.tenant_id),
    endpoint_id: String(row.endpoint_id),
    run_id: String(row.run_id),
    target_id: String(row.target_id),
    state: String(row.state) as DeliveryState,
    owner: strOrNull(row.owner),
    lease_expires_at: numOrNull(row.lease_expires_at),
    delivered_through: Number(row.delivered_through),
    queued_through: Number(row.queued_through),
    attempts: Number(row.attempts),
    next_attempt_at: numOrNull(row.next_attempt_at),
    first_failure_at: numOrNull(row.first_failure_at),
    last_error: strOrNull(row.last_error),
    given_up_reason: strOrNull(row.given_up_reason) as GiveUpReason | null,
    created_at: Number(row.created_at),
    updated_at: Number(row.updated_at),
  };
}
