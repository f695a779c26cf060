/**
 * §3 "Approval": `run_stop` needs AIP approval; the route's `approval_authorization` (an
 * ApprovalRecord) must match the action's `approval` exactly, or the host refuses with 403
 * before Hermes hears of it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvalFor, approvedDecision, POLICY_HASH } from '../../helpers/aip-runtime/approval.js';
import { TENANT_ID, hexId } from '../../helpers/aip-runtime/deployment.js';
import { capability, closeDeployments, runAction, startDeployment, type Deployment } from '../../helpers/aip-runtime/deployment-fixture.js';
import type { ActionOptions, AipAction } from '../../helpers/aip-runtime/dispatcher.js';
import { expectRouteMismatch, expectSignedResult, startRunThroughHost } from '../../helpers/aip-runtime/expectations.js';

describe('§3 approval', () => {
  let deployment: Deployment;
  let runId: string;

  beforeAll(async () => {
    deployment = await startDeployment();
    runId = await startRunThroughHost(deployment, {
      input: 'a long job',
      sim_script: [
        { type: 'sleep', ms: 60_000 },
        { type: 'complete', output: 'late' },
      ],
    });
  });
  afterAll(closeDeployments);

  const stopRequests = () => deployment.simulator.requests.filter((request) => request.method === 'POST' && request.path.endsWith('/stop')).length;

  function stopAction(): AipAction {
    return runAction('run_stop', runId, { idempotency_key: hexId('idem_') });
  }

  function approvalOf(action: AipAction, overrides: { policyHash?: string; tenantId?: string; actionId?: string } = {}) {
    return approvalFor({
      actionId: overrides.actionId ?? action.id,
      capabilityId: capability('run_stop'),
      tenantId: overrides.tenantId ?? TENANT_ID,
      central: deployment.runtime.gateway.principal,
      ...(overrides.policyHash ? { policyHash: overrides.policyHash } : {}),
    });
  }

  async function refused(action: AipAction, options: ActionOptions): Promise<void> {
    const before = stopRequests();
    expectRouteMismatch(await deployment.runtime.dispatcher.invoke(deployment.host.target, action, options), 403);
    expect(stopRequests()).toBe(before);
  }

  it('approval.reject.missing_route_record: approval on the action, none in the route → 403', async () => {
    const action = stopAction();
    await refused({ ...action, approval: approvalOf(action).decision }, {});
  });

  it('approval.reject.unused_route_record: a route record, no approval on the action → 403', async () => {
    const action = stopAction();
    await refused(action, { approvalRecord: approvalOf(action).record });
  });

  it('approval.reject.other_action: a valid record issued for another action → 403', async () => {
    const action = stopAction();
    const other = approvalOf(action, { actionId: hexId('act_') });
    await refused({ ...action, approval: other.decision }, { approvalRecord: other.record });
  });

  it('approval.reject.policy_hash_mismatch: record under c…c, the decision under a…a, same approval id → 403', async () => {
    const action = stopAction();
    const { record } = approvalOf(action, { policyHash: 'c'.repeat(64) });
    const decision = approvedDecision(record['request']['id'], POLICY_HASH, Date.parse(record['decision']['decided_at']));
    await refused({ ...action, approval: decision }, { approvalRecord: record });
  });

  it('approval.reject.other_tenant: the record request is for another tenant → 403', async () => {
    const action = stopAction();
    const { decision, record } = approvalOf(action, { tenantId: 'tenant-globex' });
    await refused({ ...action, approval: decision }, { approvalRecord: record });
  });

  it('approval.reject.unverifiable_record: approved but without decisions → 403', async () => {
    const action = stopAction();
    const { decision, record } = approvalOf(action);
    const { decisions: _none, ...withoutDecisions } = record;
    await refused({ ...action, approval: decision }, { approvalRecord: withoutDecisions });
  });

  it('approval.accepted: a matching record in the route → 200 signed action_result, and Hermes is asked to stop', async () => {
    const action = stopAction();
    const { decision, record } = approvalOf(action);
    const before = stopRequests();
    const result = expectSignedResult(
      await deployment.runtime.dispatcher.invoke(deployment.host.target, { ...action, approval: decision }, { approvalRecord: record }),
    );
    expect(result.status, JSON.stringify(result)).toBe('completed');
    expect(stopRequests()).toBe(before + 1);
  });
});
