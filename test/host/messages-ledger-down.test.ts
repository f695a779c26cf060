/**
 * The run ledger unreachable (a PostgreSQL URL nothing listens on): the host refuses what it cannot
 * record, as the reference does with its storage down, and never executes an unrecorded message.
 */
import { describe, expect, it } from 'vitest';
import { createPostgresLedger } from 'aip-connector-hermes-agent';
import { actionEnvelope, actionId, cap, errorOf, gatewayPrincipal, routeFor, signed, startHost, TENANT } from './messages-support.js';
import { rfc3339, timeArray } from '../../src/host/wire/time.js';

const unreachable = () => createPostgresLedger({ connectionString: 'postgres://nobody:nothing@127.0.0.1:1/none' });

describe('the run ledger unreachable', () => {
  it('an action → 502 connector_host.execution (its message id cannot be recorded), and Hermes sees nothing', async () => {
    const host = await startHost({ ledger: unreachable() });
    const answer = await host.post(signed(actionEnvelope(host, { id: actionId(), capability_id: cap('run_status'), input: { run_id: 'run_x' } })));
    expect(answer.status).toBe(502);
    expect(errorOf(answer)).toMatchObject({ code: 'connector_host.execution', category: 'connector', retryable: false });
    expect(host.sim.requests.filter((request) => request.path.startsWith('/v1/runs'))).toEqual([]);
  });

  it('an approved action → 503 approval_authorization_unavailable (temporary, retryable, 1 000 ms)', async () => {
    const host = await startHost({ ledger: unreachable() });
    const id = actionId();
    const now = Date.now();
    const approvalId = `appr_${actionId().slice(4)}`;
    const decision = {
      approval_id: approvalId,
      decision: 'approved',
      approver: { id: 'human:approver', kind: 'human' },
      decided_at: rfc3339(now),
      reason: 'ok',
      policy_hash: 'a'.repeat(64),
    };
    const selector = { type: 'principal', id: 'human:approver' };
    const record = {
      request: {
        id: approvalId,
        action_id: id,
        capability_id: cap('run_approval'),
        requester: gatewayPrincipal,
        subject: gatewayPrincipal,
        approver_selector: selector,
        reason: 'test',
        expires_at: rfc3339(now + 60_000),
        identity: { tenant: { id: TENANT } },
        policy_snapshot: { required: true, approver_selector: selector, ttl_ms: 60_000, minimum_distinct_principals: 1 },
        policy_hash: 'a'.repeat(64),
      },
      status: 'approved',
      decision,
      decisions: [
        {
          decision,
          authority: {
            principal_id: 'human:approver',
            tenant_id: TENANT,
            roles: [],
            groups: [],
            tenant_policies: [],
            external_systems: [],
            delegated_scopes: [],
            revision: 1,
            revoked: false,
          },
          evidence_hash: 'b'.repeat(64),
          recorded_at: timeArray(now),
        },
      ],
      created_at: timeArray(now),
      updated_at: timeArray(now),
    };
    const action = { id, capability_id: cap('run_approval'), input: { run_id: 'run_x', choice: 'once' }, idempotency_key: `k-${id}`, approval: decision };
    const text = signed(actionEnvelope(host, action, { ...routeFor(host, id, cap('run_approval')), approval_authorization: record }));
    const answer = await host.post(text);
    expect(answer.status).toBe(503);
    expect(errorOf(answer)).toMatchObject({
      code: 'connector_host.approval_authorization_unavailable',
      category: 'temporary',
      retryable: true,
      retry_after_ms: 1000,
    });
  });
});
