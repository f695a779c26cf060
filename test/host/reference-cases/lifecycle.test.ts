/**
 * §3 "Lifecycle": heartbeat timing (with the page's tolerances) and fences, a lease the
 * runtime lets expire (not ready, actions 503, cancels not gated, the host tries to
 * re-register), then recovery once the control plane grants again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { replicaId } from '../../helpers/aip-runtime/deployment.js';
import type { ControlRecord } from '../../helpers/aip-runtime/control-plane.js';
import {
  closeDeployments,
  getJson,
  runAction,
  runStartAction,
  startDeployment,
  waitForReady,
  type Deployment,
} from '../../helpers/aip-runtime/deployment-fixture.js';
import { expectSignedError, expectSignedResult } from '../../helpers/aip-runtime/expectations.js';

const HEARTBEAT_MS = 1_000;
const LEASE_TTL_MS = 3_000;
/** The page's bound on when the first heartbeat or a recovery attempt must arrive after its cause. */
const JITTERED_BOUND_MS = 1.25 * HEARTBEAT_MS + 1_000;

const grantedSequence = (record: ControlRecord): number => record.outcome?.['lease']?.['sequence'];

describe('§3 lifecycle', () => {
  let deployment: Deployment;
  let register: ControlRecord;
  let firstBeat: ControlRecord;
  let runId: string;
  let routedActionId: string;

  beforeAll(async () => {
    deployment = await startDeployment({ leaseTtlMs: LEASE_TTL_MS, settings: { HEARTBEAT_MS: String(HEARTBEAT_MS) }, waitReady: false });
    register = await deployment.runtime.control.waitFor((record) => record.operation === 'register' && record.status === 200, 'granted register');
  });
  afterAll(closeDeployments);

  it('control.heartbeat.first_within_interval: granted, fenced on the registration, ready, an integer in_flight, round-trips', async () => {
    firstBeat = await deployment.runtime.control.waitFor((record) => record.operation === 'heartbeat', 'first heartbeat');
    expect(firstBeat.arrivedAt - register.arrivedAt).toBeLessThanOrEqual(JITTERED_BOUND_MS);
    expect(firstBeat.problems).toEqual([]);
    expect(firstBeat.status).toBe(200);
    const payload = firstBeat.request!.command.payload;
    expect(payload['replica_id']).toBe(replicaId(1));
    expect(payload['previous_sequence']).toBe(grantedSequence(register));
    expect(payload['connector_ready']).toBe(true);
    expect(Number.isInteger(payload['in_flight'])).toBe(true);
  });

  it('control.heartbeat.cadence: the second heartbeat within interval + 1 s, fenced on the first', async () => {
    const first = deployment.runtime.control.records.indexOf(firstBeat);
    const second = await deployment.runtime.control.waitFor((record) => record.operation === 'heartbeat', 'second heartbeat', { from: first + 1 });
    expect(second.arrivedAt - firstBeat.arrivedAt).toBeLessThanOrEqual(HEARTBEAT_MS + 1_000);
    expect(second.request!.command.payload['previous_sequence']).toBe(grantedSequence(firstBeat));
    expect(second.status).toBe(200);

    const started = await deployment.runtime.dispatcher.invoke(deployment.host.target, runStartAction());
    runId = (expectSignedResult(started).output as any).run_id;
    routedActionId = started.prepared.route!.action_id;
  });

  describe('the runtime refuses renewal and registration until the lease expires', () => {
    let refusedFrom: number;

    beforeAll(async () => {
      const { control } = deployment.runtime;
      control.mode = 'refuse';
      refusedFrom = control.records.length;
      const expiresAt = control.lease(replicaId(1))!.expiresAt;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresAt - Date.now())));
    });

    it('lease.expired.ready_503: /ready is 503 not_ready with lease_valid false', async () => {
      const ready = await waitForReady(deployment.host, 503, JITTERED_BOUND_MS + 2_000);
      expect(ready.status).toBe('not_ready');
      expect(ready.lease_valid).toBe(false);
    });

    it('lease.expired.action_503_not_ready: an action → 503 connector_host.not_ready, temporary, retryable', async () => {
      const outcome = await deployment.runtime.dispatcher.invoke(deployment.host.target, runAction('run_status', runId));
      expectSignedError(outcome, 503, 'connector_host.not_ready', 'temporary', true);
    });

    it('lease.expired.cancel_not_gated: a cancel is not refused as not ready', async () => {
      const outcome = await deployment.runtime.dispatcher.cancel(deployment.host.target, routedActionId);
      expect(outcome.verdict.failed, outcome.exchange.text).toEqual([]);
      expect(outcome.verdict.error?.code).not.toBe('connector_host.not_ready');
      expect(outcome.exchange.status).not.toBe(503);
    });

    it('lease.expired.host_attempts_recovery: the host tries to register again, and is refused', async () => {
      const expiredAt = deployment.runtime.control.lease(replicaId(1))!.expiresAt;
      const attempt = await deployment.runtime.control.waitFor((record) => record.operation === 'register', 're-registration attempt', { from: refusedFrom });
      expect(attempt.arrivedAt - expiredAt).toBeLessThanOrEqual(JITTERED_BOUND_MS);
      expect(attempt.status).toBe(403);
      expect(attempt.problems).toEqual([]);
    });

    it('lease.recovered: once granted again, a register with a fresh request_id, /ready 200, an action succeeds', async () => {
      const { control } = deployment.runtime;
      const refusedIds = new Set(control.records.slice(refusedFrom).map((record) => record.requestId));
      const grantFrom = control.records.length;
      const grantedAt = Date.now();
      control.mode = 'grant';
      const granted = await control.waitFor((record) => record.operation === 'register' && record.status === 200, 'granted re-registration', {
        from: grantFrom,
      });
      expect(granted.arrivedAt - grantedAt).toBeLessThanOrEqual(JITTERED_BOUND_MS + 1_000);
      expect(refusedIds.has(granted.requestId)).toBe(false);
      await waitForReady(deployment.host, 200);
      expect((await getJson(`${deployment.host.origin}/ready`)).body.lease_valid).not.toBe(false);
      expectSignedResult(await deployment.runtime.dispatcher.invoke(deployment.host.target, runAction('run_status', runId)));
    });
  });
});
