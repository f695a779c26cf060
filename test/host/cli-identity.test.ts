/**
 * The built host's static identity binding, from its settings: the reference gateway binds its
 * principal to the host's tenant, credential handle and external account (§1.4), so an action
 * whose lookup hints name exactly the configured handle or account executes, and one naming
 * any other is refused 403 before Hermes is asked.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDeployments, type Deployment, runAction, runRequests, startDeployment } from '../helpers/aip-runtime/deployment-fixture.js';
import { TENANT_ID } from '../helpers/aip-runtime/deployment.js';
import type { Outcome } from '../helpers/aip-runtime/dispatcher.js';
import { expectSignedError, expectSignedResult } from '../helpers/aip-runtime/expectations.js';

const CREDENTIAL = { id: 'cred_hermes_acme', issuer: 'vault.connectors.test', scopes: ['runs:read', 'runs:write'] };
const REVISION = 'credrev_7';
const ACCOUNT = { id: 'acct-4711', system: 'hermes-agent' };

describe('hermes-aip host: the configured credential handle and external account', { timeout: 60_000 }, () => {
  let deployment: Deployment;

  beforeAll(async () => {
    deployment = await startDeployment({
      settings: {
        CREDENTIAL_ID: CREDENTIAL.id,
        CREDENTIAL_ISSUER: CREDENTIAL.issuer,
        CREDENTIAL_SCOPES: CREDENTIAL.scopes.join(','),
        CREDENTIAL_REVISION: REVISION,
        EXTERNAL_ACCOUNT_ID: ACCOUNT.id,
        EXTERNAL_ACCOUNT_SYSTEM: ACCOUNT.system,
      },
    });
  });
  afterAll(closeDeployments);

  /** A run_status action claiming these identity hints, on a route pinned to the configured credential revision. */
  async function claiming(claims: Record<string, unknown>): Promise<{ outcome: Outcome; hermesAsked: boolean }> {
    const before = runRequests(deployment.simulator);
    const action = runAction('run_status', 'run_never_started', { identity: { tenant: { id: TENANT_ID }, ...claims } });
    const outcome = await deployment.runtime.dispatcher.invoke(deployment.host.target, action, { route: { credential_revision_ref: REVISION } });
    return { outcome, hermesAsked: runRequests(deployment.simulator) > before };
  }

  it('an action claiming exactly the configured credential handle executes', async () => {
    const { outcome, hermesAsked } = await claiming({ credential_ref: CREDENTIAL });
    expect(expectSignedResult(outcome).error?.code).toBe('connector.hermes_agent.not_found');
    expect(hermesAsked).toBe(true);
  });

  it('an action claiming exactly the configured external account executes', async () => {
    const { outcome, hermesAsked } = await claiming({ external_account: ACCOUNT });
    expect(expectSignedResult(outcome).error?.code).toBe('connector.hermes_agent.not_found');
    expect(hermesAsked).toBe(true);
  });

  it.each([
    ['another credential id', { credential_ref: { ...CREDENTIAL, id: 'cred_other' } }],
    ['another credential issuer', { credential_ref: { ...CREDENTIAL, issuer: 'vault.elsewhere.test' } }],
    ['another external account id', { external_account: { ...ACCOUNT, id: 'acct-0815' } }],
    ['another external account system', { external_account: { ...ACCOUNT, system: 'other-product' } }],
  ])('an action claiming %s → 403 auth.identity_resolution_failed, Hermes not asked', async (_name, claims) => {
    const { outcome, hermesAsked } = await claiming(claims);
    expectSignedError(outcome, 403, 'auth.identity_resolution_failed', 'auth', false);
    expect(hermesAsked).toBe(false);
  });
});
