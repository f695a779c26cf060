/**
 * The RunLedger interface itself, the same cases for every backend (memory, SQLite, and
 * PostgreSQL when HERMES_TEST_PG_URL is set): claims and their leases, owner checks, settle,
 * release, abandoned claims, purging, run bindings with COALESCE updates, open runs, schema
 * migrations, and concurrent claims of one key from two ledgers over one store.
 */
import { describe, expect, it } from 'vitest';
import {
  ConnectorConfigError,
  createHermesConnector,
  createPostgresLedger,
  createSqliteLedger,
  type AipActionResult,
  type RunEvidence,
  type RunLedger,
} from 'aip-connector-hermes-agent';
import { LEDGER_BACKENDS } from '../helpers/ledgers.js';
import { INSPECTABLE_BACKENDS } from '../helpers/ledger-stores.js';

type ClaimRequest = Parameters<RunLedger['claim']>[0];
type IdempotencyRecord = NonNullable<Awaited<ReturnType<RunLedger['get']>>>;

const T0 = 1_800_000_000_000;
const LEASE = 30_000;
const TTL = 24 * 60 * 60 * 1000;
const CAP = 'cap:hermes_agent:local:run_start';
const FP_A = 'a'.repeat(64);
const FP_B = 'b'.repeat(64);

let counter = 0;
const unique = (prefix: string) => `${prefix}_${process.pid}_${++counter}`;

function claimOf(overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  const now = overrides.now ?? T0;
  return {
    capability_id: CAP,
    idempotency_key: unique('key'),
    fingerprint: FP_A,
    action_id: unique('act'),
    owner: 'owner-a',
    now,
    lease_expires_at: now + LEASE,
    expires_at: now + TTL,
    ...overrides,
  };
}

/** The record a fresh claim must leave behind. */
function inFlightRecord(request: ClaimRequest): IdempotencyRecord {
  return {
    capability_id: request.capability_id,
    idempotency_key: request.idempotency_key,
    fingerprint: request.fingerprint,
    action_id: request.action_id,
    state: 'in_flight',
    result: null,
    lease_owner: request.owner,
    lease_expires_at: request.lease_expires_at,
    created_at: request.now,
    expires_at: request.expires_at,
  };
}

function resultOf(actionId: string, runId = unique('run')): AipActionResult {
  return {
    action_id: actionId,
    status: 'completed',
    output: { run_id: runId, status: 'started', nested: { list: [1, 'two', null], flag: true } },
    receipt: {
      receipt_id: unique('rcpt'),
      capability_id: CAP,
      endpoint_id: 'local',
      operation: 'run_start',
      http_status: 202,
      idempotency_key: 'k',
      started_at: new Date(T0).toISOString(),
      completed_at: new Date(T0 + 5).toISOString(),
    },
  };
}

function evidenceOf(overrides: Partial<RunEvidence> = {}): RunEvidence {
  const runId = overrides.run_id ?? unique('run');
  return {
    action_id: unique('act'),
    capability_id: CAP,
    endpoint_id: 'local',
    tenant_id: 'tenant-1',
    run_id: runId,
    session_id: 'session-1',
    credential_revision: '0123456789ab',
    created_at: T0,
    updated_at: T0,
    last_status: 'started',
    terminal_event: null,
    evidence_lost: false,
    ...overrides,
  };
}

describe.each(LEDGER_BACKENDS)('RunLedger contract: $name', (backend) => {
  const fresh = async (): Promise<RunLedger> => (await backend.create()).ledger;

  describe('claim and get', () => {
    it('a first claim owns the key and get returns exactly the in-flight record', async () => {
      const ledger = await fresh();
      const request = claimOf();
      expect(await ledger.claim(request)).toEqual({ claimed: true });
      expect(await ledger.get(request, T0)).toEqual(inFlightRecord(request));
    });

    it('a second claim of a live key does not own it and sees the first record unchanged', async () => {
      const ledger = await fresh();
      const first = claimOf();
      await ledger.claim(first);
      const second = claimOf({ idempotency_key: first.idempotency_key, fingerprint: FP_B, owner: 'owner-b', now: T0 + 1000 });
      expect(await ledger.claim(second)).toEqual({ claimed: false, record: inFlightRecord(first) });
      expect(await ledger.get(first, T0 + 1000)).toEqual(inFlightRecord(first));
    });

    it('the scope is (capability, key): another capability or another key is another claim', async () => {
      const ledger = await fresh();
      const first = claimOf();
      await ledger.claim(first);
      const otherCapability = claimOf({ idempotency_key: first.idempotency_key, capability_id: 'cap:hermes_agent:local:run_stop', owner: 'owner-b' });
      const otherKey = claimOf({ owner: 'owner-b' });
      expect(await ledger.claim(otherCapability)).toEqual({ claimed: true });
      expect(await ledger.claim(otherKey)).toEqual({ claimed: true });
      expect(await ledger.get(first, T0)).toEqual(inFlightRecord(first));
      expect(await ledger.get(otherCapability, T0)).toEqual(inFlightRecord(otherCapability));
    });

    it('get: unknown keys are undefined, and a record is invisible from its expires_at on', async () => {
      const ledger = await fresh();
      const request = claimOf();
      await ledger.claim(request);
      expect(await ledger.get({ capability_id: CAP, idempotency_key: unique('never') }, T0)).toBeUndefined();
      expect(await ledger.get(request, request.expires_at - 1)).toEqual(inFlightRecord(request));
      expect(await ledger.get(request, request.expires_at)).toBeUndefined();
    });

    it('a claim over an expired record succeeds and replaces it (another input, owner and action)', async () => {
      const ledger = await fresh();
      const first = claimOf();
      await ledger.claim(first);
      await ledger.settle(first, first.owner, resultOf(first.action_id));
      const later = claimOf({ idempotency_key: first.idempotency_key, fingerprint: FP_B, owner: 'owner-b', now: first.expires_at });
      expect(await ledger.claim(later)).toEqual({ claimed: true });
      expect(await ledger.get(later, later.now)).toEqual(inFlightRecord(later));
    });

    it('a claim one millisecond before expiry does not replace the record', async () => {
      const ledger = await fresh();
      const first = claimOf();
      await ledger.claim(first);
      const early = claimOf({ idempotency_key: first.idempotency_key, owner: 'owner-b', now: first.expires_at - 1 });
      expect(await ledger.claim(early)).toEqual({ claimed: false, record: inFlightRecord(first) });
    });
  });

  describe('leases, settle and release, with owner checks', () => {
    it('renewLease: the owner extends its lease; another owner changes nothing', async () => {
      const ledger = await fresh();
      const request = claimOf();
      await ledger.claim(request);
      expect(await ledger.renewLease(request, 'owner-b', T0 + 99_000)).toBe(false);
      expect(await ledger.get(request, T0)).toEqual(inFlightRecord(request));
      expect(await ledger.renewLease(request, 'owner-a', T0 + 90_000)).toBe(true);
      expect(await ledger.get(request, T0)).toEqual({ ...inFlightRecord(request), lease_expires_at: T0 + 90_000 });
    });

    it('renewLease of an unknown key or of a settled claim is false', async () => {
      const ledger = await fresh();
      const request = claimOf();
      expect(await ledger.renewLease(request, 'owner-a', T0 + 1)).toBe(false);
      await ledger.claim(request);
      await ledger.settle(request, 'owner-a', resultOf(request.action_id));
      expect(await ledger.renewLease(request, 'owner-a', T0 + 90_000)).toBe(false);
      expect((await ledger.get(request, T0))?.lease_expires_at).toBeNull();
    });

    it('settle: another owner changes nothing; the owner stores the result and gives up the lease', async () => {
      const ledger = await fresh();
      const request = claimOf();
      await ledger.claim(request);
      const result = resultOf(request.action_id);
      await ledger.settle(request, 'owner-b', resultOf('act_intruder'));
      expect(await ledger.get(request, T0)).toEqual(inFlightRecord(request));
      await ledger.settle(request, 'owner-a', result);
      expect(await ledger.get(request, T0)).toEqual({ ...inFlightRecord(request), state: 'done', result, lease_owner: null, lease_expires_at: null });
    });

    it('settle twice: the first outcome stands', async () => {
      const ledger = await fresh();
      const request = claimOf();
      await ledger.claim(request);
      const result = resultOf(request.action_id);
      await ledger.settle(request, 'owner-a', result);
      await ledger.settle(request, 'owner-a', resultOf(request.action_id));
      expect((await ledger.get(request, T0))?.result).toEqual(result);
    });

    it('a failed result with an error round-trips exactly', async () => {
      const ledger = await fresh();
      const request = claimOf();
      await ledger.claim(request);
      const failed: AipActionResult = {
        action_id: request.action_id,
        status: 'failed',
        error: {
          code: 'connector.hermes_agent.remote_temporary',
          message: 'Hermes endpoint `local` answered HTTP 503: provider error',
          category: 'temporary',
          retryable: false,
          details: { uncertain_outcome: true, endpoint_id: 'local', operation: 'run_start', remote_status: 503 },
          source: { component: 'aip-connector-hermes-agent' },
        },
      };
      await ledger.settle(request, 'owner-a', failed);
      expect((await ledger.get(request, T0))?.result).toEqual(failed);
    });

    it('release: another owner changes nothing; the owner drops the claim and the key can be claimed again', async () => {
      const ledger = await fresh();
      const request = claimOf();
      await ledger.claim(request);
      await ledger.release(request, 'owner-b');
      expect(await ledger.get(request, T0)).toEqual(inFlightRecord(request));
      await ledger.release(request, 'owner-a');
      expect(await ledger.get(request, T0)).toBeUndefined();
      const again = claimOf({ idempotency_key: request.idempotency_key, fingerprint: FP_B, owner: 'owner-b' });
      expect(await ledger.claim(again)).toEqual({ claimed: true });
      expect(await ledger.get(again, T0)).toEqual(inFlightRecord(again));
    });

    it('release never drops a settled record', async () => {
      const ledger = await fresh();
      const request = claimOf();
      await ledger.claim(request);
      const result = resultOf(request.action_id);
      await ledger.settle(request, 'owner-a', result);
      await ledger.release(request, 'owner-a');
      expect(await ledger.get(request, T0)).toEqual({ ...inFlightRecord(request), state: 'done', result, lease_owner: null, lease_expires_at: null });
    });
  });

  describe('an outcome stored with its evidence', () => {
    it('settle with a binding: the result is stored and the run is bound, by action id and by run id', async () => {
      const ledger = await fresh();
      const request = claimOf();
      await ledger.claim(request);
      const binding = evidenceOf({ action_id: request.action_id });
      const result = resultOf(request.action_id, binding.run_id);
      await ledger.settle(request, 'owner-a', result, { bind: binding });
      expect((await ledger.get(request, T0))?.result).toEqual(result);
      expect(await ledger.evidence(request.action_id, binding.tenant_id)).toEqual(binding);
      expect(await ledger.evidence(binding.run_id, binding.tenant_id)).toEqual(binding);
    });

    it('settle by another owner stores no result but still binds the run: a run Hermes started is a fact', async () => {
      const ledger = await fresh();
      const request = claimOf();
      await ledger.claim(request);
      const binding = evidenceOf({ action_id: request.action_id });
      await ledger.settle(request, 'owner-b', resultOf(request.action_id), { bind: binding });
      expect(await ledger.get(request, T0)).toEqual(inFlightRecord(request));
      expect(await ledger.evidence(request.action_id, binding.tenant_id)).toEqual(binding);
    });

    it('settle with an update patches the bound run; release with an update drops the claim and patches it', async () => {
      const ledger = await fresh();
      const binding = evidenceOf();
      await ledger.recordRun(binding);
      const run = { run_id: binding.run_id, endpoint_id: binding.endpoint_id, tenant_id: binding.tenant_id };
      const stop = claimOf({ capability_id: 'cap:hermes_agent:local:run_stop' });
      await ledger.claim(stop);
      await ledger.settle(stop, 'owner-a', resultOf(stop.action_id), { update: run, patch: { last_status: 'stopping', updated_at: T0 + 1 } });
      expect(await ledger.evidence(binding.action_id, binding.tenant_id)).toEqual({ ...binding, last_status: 'stopping', updated_at: T0 + 1 });
      const gone = claimOf({ capability_id: 'cap:hermes_agent:local:run_stop' });
      await ledger.claim(gone);
      await ledger.release(gone, 'owner-a', { update: run, patch: { evidence_lost: true, updated_at: T0 + 2 } });
      expect(await ledger.get(gone, T0)).toBeUndefined();
      expect(await ledger.evidence(binding.action_id, binding.tenant_id)).toEqual({
        ...binding,
        last_status: 'stopping',
        evidence_lost: true,
        updated_at: T0 + 2,
      });
    });

    it.runIf(backend.durable)('atomic: when the evidence cannot be written, the outcome is not stored either', async () => {
      const ledger = await fresh();
      const request = claimOf();
      await ledger.claim(request);
      // run_id is NOT NULL in the schema: the binding's statement fails inside the unit.
      const broken = { ...evidenceOf({ action_id: request.action_id }), run_id: null } as unknown as RunEvidence;
      await expect(ledger.settle(request, 'owner-a', resultOf(request.action_id), { bind: broken })).rejects.toThrow();
      expect(await ledger.get(request, T0)).toEqual(inFlightRecord(request));
      expect(await ledger.evidence(request.action_id, broken.tenant_id)).toBeNull();
    });
  });

  describe('settleAbandoned', () => {
    const abandonedResult = (actionId: string): AipActionResult => ({
      action_id: actionId,
      status: 'failed',
      error: {
        code: 'connector.hermes_agent.outcome_unknown',
        message: 'left in flight',
        category: 'connector',
        retryable: false,
        details: { uncertain_outcome: true, original_action_id: actionId },
      },
    });

    it('not for a live lease (up to and including lease_expires_at): false, nothing changes', async () => {
      const ledger = await fresh();
      const request = claimOf();
      await ledger.claim(request);
      expect(await ledger.settleAbandoned(request, T0 + 1, abandonedResult('act_x'))).toBe(false);
      expect(await ledger.settleAbandoned(request, request.lease_expires_at, abandonedResult('act_x'))).toBe(false);
      expect(await ledger.get(request, T0)).toEqual(inFlightRecord(request));
    });

    it('a renewed lease is live again', async () => {
      const ledger = await fresh();
      const request = claimOf();
      await ledger.claim(request);
      await ledger.renewLease(request, 'owner-a', request.lease_expires_at + 60_000);
      expect(await ledger.settleAbandoned(request, request.lease_expires_at + 1, abandonedResult('act_x'))).toBe(false);
      expect((await ledger.get(request, T0))?.state).toBe('in_flight');
    });

    it('after the lease expired: true, the record is done with the given result and no owner', async () => {
      const ledger = await fresh();
      const request = claimOf();
      await ledger.claim(request);
      const result = abandonedResult('act_x');
      expect(await ledger.settleAbandoned(request, request.lease_expires_at + 1, result)).toBe(true);
      expect(await ledger.get(request, T0)).toEqual({ ...inFlightRecord(request), state: 'done', result, lease_owner: null, lease_expires_at: null });
      // The dead owner can no longer settle, renew or release it.
      await ledger.settle(request, 'owner-a', resultOf(request.action_id));
      expect(await ledger.renewLease(request, 'owner-a', T0 + 999_999)).toBe(false);
      await ledger.release(request, 'owner-a');
      expect((await ledger.get(request, T0))?.result).toEqual(result);
    });

    it('not for a done record: false, the stored result stays', async () => {
      const ledger = await fresh();
      const request = claimOf();
      await ledger.claim(request);
      const result = resultOf(request.action_id);
      await ledger.settle(request, 'owner-a', result);
      expect(await ledger.settleAbandoned(request, request.lease_expires_at + 1, abandonedResult('act_x'))).toBe(false);
      expect((await ledger.get(request, T0))?.result).toEqual(result);
    });

    it('not for an unknown key: false', async () => {
      const ledger = await fresh();
      expect(await ledger.settleAbandoned({ capability_id: CAP, idempotency_key: unique('never') }, T0 + LEASE * 10, abandonedResult('act_x'))).toBe(false);
    });
  });

  describe('purgeExpired', () => {
    it('deletes exactly the records whose expires_at passed, and returns how many', async () => {
      const ledger = await fresh();
      const early = claimOf({ expires_at: T0 + 10 });
      const edge = claimOf({ expires_at: T0 + 20 });
      const late = claimOf({ expires_at: T0 + 30 });
      for (const request of [early, edge, late]) await ledger.claim(request);
      await ledger.settle(edge, 'owner-a', resultOf(edge.action_id));

      expect(await ledger.purgeExpired(T0 + 20)).toBe(2);
      expect(await ledger.purgeExpired(T0 + 20)).toBe(0);
      // Gone, not merely hidden: a claim dated before their expiry now owns those keys.
      for (const purged of [early, edge]) {
        const again = claimOf({ idempotency_key: purged.idempotency_key, owner: 'owner-b', now: T0 });
        expect(await ledger.claim(again)).toEqual({ claimed: true });
      }
      expect(await ledger.get(late, T0 + 29)).toEqual(inFlightRecord(late));
      expect(await ledger.claim(claimOf({ idempotency_key: late.idempotency_key, owner: 'owner-b', now: T0 }))).toEqual({
        claimed: false,
        record: inFlightRecord(late),
      });
    });

    it('an empty ledger purges 0', async () => {
      const ledger = await fresh();
      expect(await ledger.purgeExpired(T0 + TTL * 2)).toBe(0);
    });
  });

  describe('run bindings', () => {
    it('recordRun, then evidence by action id and by run id return exactly the binding', async () => {
      const ledger = await fresh();
      const binding = evidenceOf();
      const other = evidenceOf({ tenant_id: null, credential_revision: null, session_id: 'session-2' });
      await ledger.recordRun(binding);
      await ledger.recordRun(other);
      expect(await ledger.evidence(binding.action_id)).toEqual(binding);
      expect(await ledger.evidence(binding.run_id)).toEqual(binding);
      expect(await ledger.evidence(other.action_id)).toEqual(other);
      expect(await ledger.evidence(other.run_id)).toEqual(other);
    });

    it('evidence of an unknown id is null', async () => {
      const ledger = await fresh();
      await ledger.recordRun(evidenceOf());
      expect(await ledger.evidence('act_unknown')).toBeNull();
      expect(await ledger.evidence('run_unknown')).toBeNull();
    });

    it('evidence is a copy: changing a returned value changes nothing stored', async () => {
      const ledger = await fresh();
      const binding = evidenceOf();
      await ledger.recordRun(binding);
      const seen = (await ledger.evidence(binding.action_id)) as RunEvidence;
      seen.last_status = 'mutated';
      binding.last_status = 'mutated too';
      expect((await ledger.evidence(binding.action_id))?.last_status).toBe('started');
    });

    it('updateRun has COALESCE semantics: only the fields given change, updated_at always', async () => {
      const ledger = await fresh();
      const binding = evidenceOf();
      await ledger.recordRun(binding);

      await ledger.updateRun({ run_id: binding.run_id, endpoint_id: 'local', tenant_id: binding.tenant_id }, { updated_at: T0 + 1 });
      expect(await ledger.evidence(binding.action_id)).toEqual({ ...binding, updated_at: T0 + 1 });

      await ledger.updateRun({ run_id: binding.run_id, endpoint_id: 'local', tenant_id: binding.tenant_id }, { updated_at: T0 + 2, last_status: 'running' });
      expect(await ledger.evidence(binding.action_id)).toEqual({ ...binding, updated_at: T0 + 2, last_status: 'running' });

      await ledger.updateRun({ run_id: binding.run_id, endpoint_id: 'local', tenant_id: binding.tenant_id }, { updated_at: T0 + 4, evidence_lost: true });
      expect(await ledger.evidence(binding.action_id)).toEqual({ ...binding, updated_at: T0 + 4, last_status: 'running', evidence_lost: true });
    });

    it('updateRun: a field present but undefined is not given either (COALESCE, as the SQL backends do)', async () => {
      const ledger = await fresh();
      const binding = evidenceOf({ last_status: 'running', terminal_event: 'run.completed', evidence_lost: true });
      await ledger.recordRun(binding);
      await ledger.updateRun(
        { run_id: binding.run_id, endpoint_id: 'local', tenant_id: binding.tenant_id },
        { updated_at: T0 + 5, last_status: undefined, terminal_event: undefined, evidence_lost: undefined },
      );
      expect(await ledger.evidence(binding.action_id)).toEqual({ ...binding, updated_at: T0 + 5 });
    });

    it('updateRun is scoped by endpoint: the same run id on another endpoint is untouched', async () => {
      const ledger = await fresh();
      const binding = evidenceOf();
      await ledger.recordRun(binding);
      await ledger.updateRun(
        { run_id: binding.run_id, endpoint_id: 'other-endpoint', tenant_id: binding.tenant_id },
        { updated_at: T0 + 9, last_status: 'completed' },
      );
      expect(await ledger.evidence(binding.action_id)).toEqual(binding);
    });

    it('updateRun reaches every binding of that run on that endpoint, among many other runs', async () => {
      const ledger = await fresh();
      const others = Array.from({ length: 50 }, () => evidenceOf());
      for (const other of others) await ledger.recordRun(other);
      const first = evidenceOf();
      const second = evidenceOf({ run_id: first.run_id });
      await ledger.recordRun(first);
      await ledger.recordRun(second);
      await ledger.updateRun({ run_id: first.run_id, endpoint_id: 'local', tenant_id: first.tenant_id }, { updated_at: T0 + 7, last_status: 'completed' });
      expect(await ledger.evidence(first.action_id)).toEqual({ ...first, updated_at: T0 + 7, last_status: 'completed' });
      expect(await ledger.evidence(second.action_id)).toEqual({ ...second, updated_at: T0 + 7, last_status: 'completed' });
      for (const other of others) expect(await ledger.evidence(other.action_id)).toEqual(other);
    });

    it('recording an action again with another run id moves its binding to that run', async () => {
      const ledger = await fresh();
      const binding = evidenceOf();
      await ledger.recordRun(binding);
      const moved = { ...binding, run_id: `${binding.run_id}_moved`, updated_at: T0 + 3, last_status: 'queued' };
      await ledger.recordRun(moved);
      expect(await ledger.evidence(binding.action_id)).toEqual(moved);
      expect(await ledger.evidence(moved.run_id)).toEqual(moved);
      expect(await ledger.evidence(binding.run_id)).toBeNull();
      await ledger.updateRun({ run_id: binding.run_id, endpoint_id: 'local', tenant_id: binding.tenant_id }, { updated_at: T0 + 9, last_status: 'completed' });
      expect(await ledger.evidence(binding.action_id)).toEqual(moved);
    });

    it('updateRun of an unknown run changes nothing and does not throw', async () => {
      const ledger = await fresh();
      const binding = evidenceOf();
      await ledger.recordRun(binding);
      await ledger.updateRun({ run_id: 'run_unknown', endpoint_id: 'local', tenant_id: binding.tenant_id }, { updated_at: T0 + 9, last_status: 'completed' });
      expect(await ledger.evidence(binding.action_id)).toEqual(binding);
      expect(await ledger.evidence('run_unknown')).toBeNull();
    });

    it('openRuns: terminal statuses (completed, failed, cancelled, interrupted) and lost evidence are excluded', async () => {
      const ledger = await fresh();
      const byStatus = (status: string, index: number, extra: Partial<RunEvidence> = {}) =>
        evidenceOf({ action_id: `act_${index}_${status}_${unique('x')}`, last_status: status, created_at: T0 + index, updated_at: T0 + index, ...extra });
      const open = [byStatus('started', 1), byStatus('running', 2), byStatus('waiting_for_approval', 3), byStatus('stopping', 4)];
      const closed = [
        byStatus('completed', 5, { terminal_event: 'run.completed' }),
        byStatus('failed', 6, { terminal_event: 'run.failed' }),
        byStatus('cancelled', 7, { terminal_event: 'run.cancelled' }),
        byStatus('interrupted', 8),
        byStatus('running', 9, { evidence_lost: true }),
      ];
      for (const binding of [...open, ...closed]) await ledger.recordRun(binding);
      const sortByAction = (list: RunEvidence[]) => [...list].sort((a, b) => a.action_id.localeCompare(b.action_id));
      expect(sortByAction(await ledger.openRuns())).toEqual(sortByAction(open));

      // An update that makes a run terminal or lost takes it out.
      await ledger.updateRun(
        { run_id: open[0]!.run_id, endpoint_id: 'local', tenant_id: open[0]!.tenant_id },
        { updated_at: T0 + 20, last_status: 'completed', terminal_event: 'run.completed' },
      );
      await ledger.updateRun({ run_id: open[1]!.run_id, endpoint_id: 'local', tenant_id: open[1]!.tenant_id }, { updated_at: T0 + 20, evidence_lost: true });
      expect(sortByAction(await ledger.openRuns())).toEqual(sortByAction(open.slice(2)));
    });

    it('openRuns of an empty ledger is []', async () => {
      const ledger = await fresh();
      expect(await ledger.openRuns()).toEqual([]);
    });
  });

  it('20 concurrent claims of one key from two ledgers over the same store: exactly one owns it', async () => {
    const store = await backend.create();
    // Both ledgers are fresh: their first use also races the schema migration.
    const ledgers = [store.ledger, store.open()];
    const key = unique('contended');
    const requests = Array.from({ length: 20 }, (_, index) => claimOf({ idempotency_key: key, owner: `owner-${index}`, action_id: `act_contender_${index}` }));
    const results = await Promise.all(requests.map((request, index) => ledgers[index % 2]!.claim(request)));

    const winners = results.flatMap((result, index) => (result.claimed ? [index] : []));
    expect(winners).toHaveLength(1);
    const winner = requests[winners[0]!]!;
    for (const result of results) {
      if (!result.claimed) expect(result.record).toEqual(inFlightRecord(winner));
    }
    for (const ledger of ledgers) expect(await ledger.get(winner, T0)).toEqual(inFlightRecord(winner));
  });

  it('20 concurrent claims over an expired record, from two ledgers: exactly one replaces it', async () => {
    const store = await backend.create();
    const ledgers = [store.ledger, store.open()];
    const old = claimOf();
    await ledgers[0]!.claim(old);
    const at = old.expires_at + 1;
    const requests = Array.from({ length: 20 }, (_, index) =>
      claimOf({ idempotency_key: old.idempotency_key, fingerprint: FP_B, owner: `owner-${index}`, action_id: `act_late_${index}`, now: at }),
    );
    const results = await Promise.all(requests.map((request, index) => ledgers[index % 2]!.claim(request)));
    const winners = results.flatMap((result, index) => (result.claimed ? [index] : []));
    expect(winners).toHaveLength(1);
    const winner = requests[winners[0]!]!;
    for (const result of results) {
      if (!result.claimed) expect(result.record).toEqual(inFlightRecord(winner));
    }
    expect(await ledgers[1]!.get(winner, at)).toEqual(inFlightRecord(winner));
  });

  it('concurrent settleAbandoned of one expired claim from two ledgers: exactly one settles it', async () => {
    const store = await backend.create();
    const ledgers = [store.ledger, store.open()];
    const request = claimOf();
    await ledgers[0]!.claim(request);
    const verdict = (index: number): AipActionResult => ({
      action_id: `act_verdict_${index}`,
      status: 'failed',
      error: {
        code: 'connector.hermes_agent.outcome_unknown',
        message: 'unknown',
        category: 'connector',
        retryable: false,
        details: { uncertain_outcome: true },
      },
    });
    const settled = await Promise.all(
      Array.from({ length: 10 }, (_, index) => ledgers[index % 2]!.settleAbandoned(request, request.lease_expires_at + 1, verdict(index))),
    );
    const winners = settled.flatMap((won, index) => (won ? [index] : []));
    expect(winners).toHaveLength(1);
    expect((await ledgers[1]!.get(request, T0))?.result).toEqual(verdict(winners[0]!));
  });

  it("a second ledger over the same store sees the first one's records and bindings", async () => {
    const store = await backend.create();
    const request = claimOf();
    await store.ledger.claim(request);
    const result = resultOf(request.action_id);
    await store.ledger.settle(request, 'owner-a', result);
    const binding = evidenceOf();
    await store.ledger.recordRun(binding);
    const other = store.open();
    expect(await other.get(request, T0)).toEqual({ ...inFlightRecord(request), state: 'done', result, lease_owner: null, lease_expires_at: null });
    expect(await other.evidence(binding.run_id)).toEqual(binding);
  });
});

describe.each(INSPECTABLE_BACKENDS)('schema migrations: $name', (backend) => {
  const versions = async (store: { query(sql: string): Promise<Array<Record<string, unknown>>> }) =>
    (await store.query('SELECT version, applied_at FROM ledger_schema_migrations ORDER BY version')).map((row) => ({
      version: Number(row.version),
      applied_at: Number(row.applied_at),
    }));

  it('the first use creates ledger_schema_migrations with version 1 exactly once, and every version once', async () => {
    const store = await backend.create();
    const ledger = store.open();
    await ledger.recordRun(evidenceOf());
    const applied = await versions(store);
    expect(applied.filter((row) => row.version === 1)).toHaveLength(1);
    expect(new Set(applied.map((row) => row.version)).size).toBe(applied.length);
    expect(applied.map((row) => row.version)).toEqual([...applied.map((row) => row.version)].sort((a, b) => a - b));
    expect(applied[0]?.version).toBe(1);
  });

  it('opening a second ledger on the same store does not re-apply anything', async () => {
    const store = await backend.create();
    const first = store.open();
    const binding = evidenceOf();
    await first.recordRun(binding);
    const before = await versions(store);

    const second = store.open();
    expect(await second.evidence(binding.action_id)).toEqual(binding);
    await second.claim(claimOf());
    expect(await versions(store)).toEqual(before);
    // A third ledger after the others closed (a restarted process): still nothing re-applied, data intact.
    await first.close();
    await second.close();
    const third = store.open();
    expect(await third.evidence(binding.run_id)).toEqual(binding);
    expect(await versions(store)).toEqual(before);
  });
});

describe('ledger configuration errors', () => {
  const codeOf = (make: () => unknown): string | undefined => {
    try {
      make();
    } catch (error) {
      expect(error).toBeInstanceOf(ConnectorConfigError);
      return (error as ConnectorConfigError).code;
    }
    return undefined;
  };
  const endpoints = [{ id: 'local', baseUrl: 'http://127.0.0.1:9', apiKey: 'hk_test_key_0123456789abcdef' }];

  it("createSqliteLedger({ path: '' }) throws invalid_ledger", () => {
    expect(codeOf(() => createSqliteLedger({ path: '' }))).toBe('invalid_ledger');
  });

  it("createPostgresLedger({ connectionString: '' }) throws invalid_ledger", () => {
    expect(codeOf(() => createPostgresLedger({ connectionString: '' }))).toBe('invalid_ledger');
  });

  it('createHermesConnector({ ledger: {} }) throws invalid_ledger', () => {
    expect(codeOf(() => createHermesConnector({ endpoints, ledger: {} as unknown as RunLedger }))).toBe('invalid_ledger');
  });

  it('createHermesConnector({ ledger: a real ledger }) is accepted (control)', async () => {
    const ledger = (await LEDGER_BACKENDS[0]!.create()).ledger;
    const connector = createHermesConnector({ endpoints, ledger });
    expect(connector.id).toBe('hermes-agent');
    await connector.close();
  });
});
