import { describe, expect, it } from 'vitest';
import { approvalRecordFingerprint, checkApprovalAuthorization } from '../../../src/host/wire/approval.js';
import { loadVectors } from './vectors.js';

const TENANT = 'tenant-acme';
const request = JSON.parse(loadVectors().find((vector) => vector.name === 'native.request.approved_action')!.documentText);
const vectorAction = request.body.action;
const vectorRecord = request.security.connector_route.approval_authorization;

const clone = <T>(value: T): T => structuredClone(value);

function decision(id: string, approver: string, kind = 'approved', policyHash = vectorRecord.request.policy_hash) {
  return { ...clone(vectorAction.approval), decision_id: id, approver: { id: approver, kind: 'human' }, decision: kind, policy_hash: policyHash };
}

function verified(decisionValue: object, principal: string, roles: string[] = []) {
  return {
    ...clone(vectorRecord.decisions[0]),
    decision: decisionValue,
    authority: { ...clone(vectorRecord.decisions[0].authority), principal_id: principal, roles },
  };
}

/** A record with these decisions, `decision` set to `terminal`, under a policy snapshot changed by `policy`. */
function recordWith(decisions: object[], terminal: object, policy: object = {}) {
  const record = clone(vectorRecord);
  record.decisions = decisions;
  record.decision = terminal;
  record.request.policy_snapshot = { ...record.request.policy_snapshot, ...policy };
  return record;
}

const check = (record: unknown, action: object = vectorAction) => checkApprovalAuthorization(record, action, TENANT);

describe('checkApprovalAuthorization', () => {
  it('accepts the reference vector, returning the record as the reference types write it', () => {
    const result = check(vectorRecord);
    expect(result).toEqual({ ok: true, record: vectorRecord });
    expect(approvalRecordFingerprint(vectorRecord)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('needs both or neither: approval and route record', () => {
    const { approval: _approval, ...unapproved } = vectorAction;
    expect(check(undefined, unapproved)).toEqual({ ok: true });
    expect(check(vectorRecord, unapproved)).toMatchObject({ ok: false });
    expect(check(undefined)).toMatchObject({ ok: false });
    expect(check({ status: 'approved' })).toEqual({ ok: false, reason: 'approval authorization is malformed' });
  });

  it('refuses a valid record issued for another action, capability or tenant', () => {
    expect(check(vectorRecord, { ...vectorAction, id: 'act_other' })).toMatchObject({ ok: false });
    expect(check(vectorRecord, { ...vectorAction, capability_id: 'cap:other' })).toMatchObject({ ok: false });
    expect(checkApprovalAuthorization(vectorRecord, vectorAction, 'tenant-other')).toMatchObject({ ok: false });
  });

  it('refuses a record under another policy hash than the action’s decision, though it is consistent in itself', () => {
    const otherHash = 'c'.repeat(64);
    const record = clone(vectorRecord);
    record.request.policy_hash = otherHash;
    record.decision.policy_hash = otherHash;
    record.decisions[0].decision.policy_hash = otherHash;
    expect(checkApprovalAuthorization(record, { ...vectorAction, approval: record.decision }, TENANT)).toMatchObject({ ok: true });
    expect(check(record)).toMatchObject({ ok: false });
  });

  it('refuses an approved record that cannot reproduce its state from its decisions', () => {
    expect(check({ ...clone(vectorRecord), decisions: [] })).toMatchObject({ ok: false });
    expect(check({ ...clone(vectorRecord), decisions: [vectorRecord.decisions[0], vectorRecord.decisions[0]] })).toMatchObject({ ok: false });
    const strangerApproved = recordWith([verified(vectorAction.approval, 'human:stranger')], vectorAction.approval);
    expect(check(strangerApproved)).toMatchObject({ ok: false });
    expect(check({ ...clone(vectorRecord), status: 'pending' })).toMatchObject({ ok: false });
  });

  it('needs minimum_distinct_principals distinct approvers, and the terminal decision is the last approval', () => {
    const first = decision('decision:1', 'human:probe-approver');
    const second = decision('decision:2', 'human:probe-approver');
    const sameTwice = recordWith([verified(first, 'human:probe-approver'), verified(second, 'human:probe-approver')], second, {
      minimum_distinct_principals: 2,
    });
    expect(check(sameTwice, { ...vectorAction, approval: second })).toMatchObject({ ok: false });
    const byOther = decision('decision:3', 'human:other');
    const twoPeople = recordWith([verified(first, 'human:probe-approver'), verified(byOther, 'human:other')], byOther, { minimum_distinct_principals: 2 });
    expect(check(twoPeople, { ...vectorAction, approval: byOther })).toMatchObject({ ok: true });
    expect(check({ ...twoPeople, decision: first }, { ...vectorAction, approval: first })).toMatchObject({ ok: false });
  });

  it('lets a denial win over approvals and refuses a decision after the terminal one', () => {
    const approved = decision('decision:1', 'human:probe-approver');
    const denied = decision('decision:2', 'human:other', 'denied');
    expect(
      check(recordWith([verified(approved, 'human:probe-approver'), verified(denied, 'human:other')], approved), { ...vectorAction, approval: approved }),
    ).toMatchObject({
      ok: false,
    });
  });

  it('evaluates a policy rule: a quorum of two distinct role holders', () => {
    const rule = { operator: 'quorum', required: 2, rules: [{ operator: 'role', name: 'ops' }], distinct_principals: true };
    const a = decision('decision:a', 'human:a');
    const b = decision('decision:b', 'human:b');
    const c = decision('decision:c', 'human:c');
    const quorum = recordWith([verified(a, 'human:a', ['ops']), verified(b, 'human:b', ['ops'])], b, { rule });
    expect(check(quorum, { ...vectorAction, approval: b })).toMatchObject({ ok: true });
    const oneOps = recordWith([verified(a, 'human:a', ['ops']), verified(c, 'human:c', ['dev'])], c, { rule });
    expect(check(oneOps, { ...vectorAction, approval: c })).toMatchObject({ ok: false });
    const all = {
      operator: 'all',
      rules: [
        { operator: 'role', name: 'ops' },
        { operator: 'role', name: 'sec' },
      ],
    };
    const onePersonBothRoles = recordWith([verified(a, 'human:a', ['ops', 'sec'])], a, { rule: all });
    expect(check(onePersonBothRoles, { ...vectorAction, approval: a })).toMatchObject({ ok: false });
    expect(
      check(recordWith([verified(a, 'human:a', ['ops', 'sec'])], a, { rule: { ...all, allow_decision_reuse: true } }), { ...vectorAction, approval: a }),
    ).toMatchObject({
      ok: true,
    });
  });

  it('matches the request selector when the policy has no rule: role, and tenant policy by the approver’s tenant', () => {
    const a = decision('decision:a', 'human:a');
    const withSelector = (selector: object, roles: string[], tenant: string | null) => {
      const record = recordWith([verified(a, 'human:a', roles)], a);
      record.request.approver_selector = selector;
      record.decisions[0].authority.tenant_id = tenant;
      return check(record, { ...vectorAction, approval: a });
    };
    expect(withSelector({ type: 'role', name: 'ops' }, ['ops'], TENANT)).toMatchObject({ ok: true });
    expect(withSelector({ type: 'role', name: 'ops' }, ['dev'], TENANT)).toMatchObject({ ok: false });
    expect(withSelector({ type: 'tenant_policy' }, [], TENANT)).toMatchObject({ ok: true });
    expect(withSelector({ type: 'tenant_policy' }, [], 'tenant-other')).toMatchObject({ ok: false });
  });

  it('compares decisions as the typed parse does: a timestamp with trailing zeros is the same instant', () => {
    const approval = { ...vectorAction.approval, decided_at: '2026-12-01T21:00:00.120000Z' };
    expect(check(vectorRecord, { ...vectorAction, approval })).toMatchObject({ ok: true });
  });
});
