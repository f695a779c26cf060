/**
 * §3 "Shutdown": SIGTERM → a fenced `drain`, then a fenced `offline`, then exit 0 within the
 * drain timeout plus 5 s.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ControlRecord } from '../../helpers/aip-runtime/control-plane.js';
import { closeDeployments, startDeployment, type Deployment } from '../../helpers/aip-runtime/deployment-fixture.js';

const DRAIN_TIMEOUT_MS = 2_000;

describe('§3 shutdown', () => {
  let deployment: Deployment;
  let signalledAt: number;
  let drain: ControlRecord;

  beforeAll(async () => {
    deployment = await startDeployment({ settings: { DRAIN_TIMEOUT_MS: String(DRAIN_TIMEOUT_MS) } });
    signalledAt = Date.now();
    deployment.host.kill('SIGTERM');
  });
  afterAll(closeDeployments);

  it('shutdown.drain: within 5 s of SIGTERM, a drain fenced on the current lease, granted', async () => {
    const { control } = deployment.runtime;
    drain = await control.waitFor((record) => record.operation === 'drain', 'drain');
    const lastGrant = control.records
      .slice(0, control.records.indexOf(drain))
      .filter((record) => record.status === 200 && record.outcome?.['status'] === 'lease')
      .at(-1);
    expect(drain.arrivedAt - signalledAt).toBeLessThanOrEqual(5_000);
    expect(drain.problems).toEqual([]);
    expect(drain.request!.command.payload['previous_sequence']).toBe(lastGrant?.outcome?.['lease']['sequence']);
    expect(drain.status).toBe(200);
  });

  it('shutdown.offline: after the drain, an offline fenced on the drain, answered offline', async () => {
    const { control } = deployment.runtime;
    const offline = await control.waitFor((record) => record.operation === 'offline', 'offline', { from: control.records.indexOf(drain) + 1 });
    expect(offline.problems).toEqual([]);
    expect(offline.request!.command.payload['previous_sequence']).toBe(drain.outcome?.['lease']?.['sequence']);
    expect(offline.outcome).toEqual({ status: 'offline' });
  });

  it('shutdown.exited: the process exits 0 within drain_timeout_ms + 5 s', async () => {
    const exit = await deployment.host.exited;
    expect(Date.now() - signalledAt).toBeLessThanOrEqual(DRAIN_TIMEOUT_MS + 5_000);
    expect(exit, deployment.host.stderr()).toEqual({ code: 0, signal: null });
  });
});
