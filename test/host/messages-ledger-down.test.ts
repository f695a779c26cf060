/**
 * The run ledger unreachable (a PostgreSQL URL nothing listens on): the host refuses what it cannot
 * record, as the reference does with its storage down, and never executes an unrecorded message.
 */
import { describe, expect, it } from 'vitest';
import { createPostgresLedger } from 'aip-connector-hermes-agent';
import { actionEnvelope, actionId, approvalFor, cap, errorOf, routeFor, signed, startHost } from './messages-support.js';

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
    const { record, decision } = approvalFor({ id, capability_id: cap('run_approval') });
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
