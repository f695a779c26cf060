/**
 * §3 "Rejected requests": signature, signer, recipient and pinned-route refusals, each a
 * signed `connector_host.route_mismatch` (401 or 403) and none reaching Hermes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NATIVE_HTTP_PROFILE, gatewayParty, hexId, replicaId } from '../../helpers/aip-runtime/deployment.js';
import { closeDeployments, runRequests, runAction, startDeployment, type Deployment } from '../../helpers/aip-runtime/deployment-fixture.js';
import type { ActionOptions, AipAction } from '../../helpers/aip-runtime/dispatcher.js';
import { expectRouteMismatch } from '../../helpers/aip-runtime/expectations.js';

describe('§3 rejected requests', () => {
  let deployment: Deployment;

  beforeAll(async () => {
    deployment = await startDeployment();
  });
  afterAll(closeDeployments);

  /** Sends a run_status action with these options; the refusal must come before any Hermes call. */
  async function refused(status: 401 | 403, options: ActionOptions, action: AipAction = runAction('run_status', 'run_never_started')): Promise<void> {
    const hermesRequests = runRequests(deployment.simulator);
    expectRouteMismatch(await deployment.runtime.dispatcher.invoke(deployment.host.target, action, options), status);
    expect(runRequests(deployment.simulator)).toBe(hermesRequests);
  }

  it('reject.bad_signature: the body changed after signing → 401', async () => {
    await refused(401, { tamper: (envelope) => void ((envelope.body as any).action.input.run_id = 'run_changed') });
  });

  it('reject.untrusted_signer: signed by another key → 401', async () => {
    await refused(401, { signer: gatewayParty() });
  });

  it('reject.wrong_recipient: to.id is not the host → 403', async () => {
    await refused(403, { to: { id: 'service:some-other-host', kind: 'service' } });
  });

  it('reject.route_tenant: the route tenant_id differs → 403', async () => {
    await refused(403, { route: { tenant_id: 'tenant-globex' } });
  });

  it('reject.route_manifest_digest: the route manifest_digest differs → 403', async () => {
    await refused(403, { route: { manifest_digest: `sha256:${'0'.repeat(64)}` } });
  });

  it('reject.route_replica: the route replica_id differs → 403', async () => {
    await refused(403, { route: { replica_id: replicaId(9) } });
  });

  it('reject.route_action_id: the route action_id differs from the body → 403', async () => {
    await refused(403, { route: { action_id: hexId('act_') } });
  });

  it('reject.route_missing: no security.connector_route → 403', async () => {
    await refused(403, { omitRoute: true });
  });

  it('reject.callback_on_non_streaming: a sync action with a callback → 403', async () => {
    const callback = { profile: NATIVE_HTTP_PROFILE, target: deployment.runtime.ingress.url, metadata: {} };
    await refused(403, { keepCallback: true }, runAction('run_status', 'run_never_started', { mode: 'sync', callback }));
  });
});
