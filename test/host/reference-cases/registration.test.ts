/**
 * §3 "Registration": the built `hermes-aip host` registers with the runtime double's control
 * plane before serving, with the payload the reference host builds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INSTANCE_ID, NATIVE_HTTP_PROFILE, TENANT_ID, TRUST_DOMAIN, VERSION_ID, replicaId } from '../../helpers/aip-runtime/deployment.js';
import { closeDeployments, startDeployment, type Deployment } from '../../helpers/aip-runtime/deployment-fixture.js';
import type { ControlRecord } from '../../helpers/aip-runtime/control-plane.js';
import { fromTimeArray } from '../../../src/host/wire/time.js';

describe('§3 registration', () => {
  let deployment: Deployment;
  let register: ControlRecord;

  beforeAll(async () => {
    deployment = await startDeployment();
    register = await deployment.runtime.control.waitFor((record) => record.operation === 'register', 'register');
  });
  afterAll(closeDeployments);

  it('control.register: decodes as the reference request, in its time window, signed by host_did, granted a lease', () => {
    expect(register.problems).toEqual([]);
    expect(register.request?.signer_did).toBe(deployment.host.target.identity.did);
    expect(register.status).toBe(200);
    expect(register.outcome?.['status']).toBe('lease');
  });

  it('control.register.payload: the replica, tenant, manifest digest and capability count the reference host sends', () => {
    const payload = register.request!.command.payload;
    const replica = payload['replica'];
    const host = deployment.host.target.identity;
    expect(replica['id']).toBe(replicaId(1));
    expect(replica['instance_id']).toBe(INSTANCE_ID);
    expect(replica['version_id']).toBe(VERSION_ID);
    expect(replica['endpoint']).toBe(deployment.host.target.url);
    expect([replica['peer_principal_id'], replica['peer_principal_kind']]).toEqual([host.principal.id, host.principal.kind]);
    expect(replica['peer_did']).toBe(host.did);
    expect(replica['trust_domain']).toBe(TRUST_DOMAIN);
    expect(replica['transport_profile']).toBe(NATIVE_HTTP_PROFILE);
    expect(replica['status']).toBe('ready');
    expect(replica['active_assignments']).toBe(0);
    expect(replica['health_revision']).toBe(0);
    expect(replica['capacity']).toBeGreaterThanOrEqual(1);
    expect(fromTimeArray(replica['lease_expires_at'])).toBeGreaterThan(register.arrivedAt - 5_000);
    expect(payload['tenant_id']).toBe(TENANT_ID);
    expect(payload['manifest_digest']).toBe(deployment.host.target.manifestDigest);
    expect(payload['capability_count']).toBe(deployment.host.manifest['capabilities'].length);
    expect(register.problems.filter((problem) => problem.includes('byte-equal'))).toEqual([]);
  });
});
