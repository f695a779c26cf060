/**
 * The pieces of execution the message tests reach only in part: the action as the connector
 * gets it, the deadline, the approval grant built from a record, and the wire result.
 */
import { describe, expect, it } from 'vitest';
import { createHermesConnector } from 'aip-connector-hermes-agent';
import { approvalGrant } from '../../src/host/approval.js';
import { actionDeadline, connectorAction, wireActionResult } from '../../src/host/execute.js';

const connector = createHermesConnector({ endpoints: [{ id: 'local', baseUrl: 'http://127.0.0.1:9', apiKey: 'k' }] });
const T0 = Date.UTC(2026, 11, 1, 21, 0, 0, 120);

describe('connectorAction', () => {
  it('async becomes sync, the callback is dropped, identity claims are replaced by the verified tenant', () => {
    const action = connectorAction(
      {
        id: 'act_1',
        capability_id: 'cap:hermes_agent:local:run_status',
        input: { run_id: 'r' },
        mode: 'async',
        callback: { profile: 'aip.native.http.v1', target: 'x' },
        identity: { tenant: { id: 'tenant-claimed' }, external_user: { id: 'u' } },
      },
      'tenant-acme',
    );
    expect(action).toEqual({
      id: 'act_1',
      capability_id: 'cap:hermes_agent:local:run_status',
      input: { run_id: 'r' },
      mode: 'sync',
      identity: { tenant: { id: 'tenant-acme' } },
    });
  });

  it('streaming stays streaming', () => {
    expect(connectorAction({ id: 'a', capability_id: 'c', input: {}, mode: 'streaming' }, 't').mode).toBe('streaming');
  });
});

describe('actionDeadline', () => {
  const status = 'cap:hermes_agent:local:run_status';
  it('the contract timeout when the action has none; the smaller of the two otherwise', () => {
    expect(actionDeadline(connector, { capability_id: status }, T0)).toBe(T0 + 60_000);
    expect(actionDeadline(connector, { capability_id: status, timeout_ms: 5_000 }, T0)).toBe(T0 + 5_000);
    expect(actionDeadline(connector, { capability_id: status, timeout_ms: 600_000 }, T0)).toBe(T0 + 60_000);
    expect(actionDeadline(connector, { capability_id: 'cap:hermes_agent:local:run_events' }, T0)).toBe(T0 + 300_000);
  });

  it('an unknown capability (the connector refuses it anyway): the action’s own timeout, or none', () => {
    expect(actionDeadline(connector, { capability_id: 'cap:other' }, T0)).toBeUndefined();
    expect(actionDeadline(connector, { capability_id: 'cap:other', timeout_ms: 10 }, T0)).toBe(T0 + 10);
  });
});

describe('approvalGrant', () => {
  const record = (request: Record<string, unknown>, decision: Record<string, unknown> = {}) => ({
    request: { id: 'appr_1', reason: 'request reason', policy_hash: 'h', policy_decision_id: 'pd', ...request },
    decision: { decided_at: '2026-12-01T21:00:00.12Z', reason: 'decision reason', ...decision },
  });
  const action = { input: { run_id: 'r', choice: 'once' } };

  it('maps the record: id, decided_at, the request’s expiry, the reason, the input and the policy decision', () => {
    expect(approvalGrant(record({ expires_at: '2026-12-01T21:01:00Z' }), action)).toEqual({
      approvalId: 'appr_1',
      decision: 'approved',
      grantedAt: T0,
      expiresAt: Date.UTC(2026, 11, 1, 21, 1, 0),
      evidence: { reason: 'decision reason', inputSnapshot: action.input, policyDecision: { policy_hash: 'h', policy_decision_id: 'pd' } },
    });
  });

  it('without a request expiry: decided_at + the policy ttl; without either: expired at once (the connector refuses it)', () => {
    expect(approvalGrant(record({ policy_snapshot: { ttl_ms: 900_000 } }), action).expiresAt).toBe(T0 + 900_000);
    expect(approvalGrant(record({}), action).expiresAt).toBe(T0);
  });

  it('a decision without a reason takes the request’s', () => {
    expect(approvalGrant(record({}, { reason: undefined }), action).evidence.reason).toBe('request reason');
  });
});

describe('wireActionResult', () => {
  it('keeps the reference fields in order, drops the receipt and an empty message list, appends notes as text parts', () => {
    const result = {
      action_id: 'act_1',
      status: 'completed' as const,
      output: { ok: true },
      message: [],
      receipt: {
        receipt_id: 'rcpt_1',
        capability_id: 'c',
        endpoint_id: 'local',
        operation: 'run_status' as const,
        started_at: 'a',
        completed_at: 'b',
      },
    };
    expect(Object.keys(wireActionResult(result))).toEqual(['action_id', 'status', 'output']);
    expect(wireActionResult(result, ['note'])).toEqual({
      action_id: 'act_1',
      status: 'completed',
      output: { ok: true },
      message: [{ type: 'text', text: 'note' }],
    });
  });

  it('an error keeps its fields in the ProtocolError order', () => {
    const wire = wireActionResult({
      action_id: 'a',
      status: 'failed',
      error: { source: { component: 'x' }, details: { uncertain_outcome: false }, retryable: false, category: 'permanent', message: 'm', code: 'c' },
    });
    expect(Object.keys(wire.error as object)).toEqual(['code', 'message', 'category', 'retryable', 'details', 'source']);
  });
});
