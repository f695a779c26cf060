import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, parseWire, wireJson } from '../../../src/host/wire/json.js';
import { reserialize } from '../../../src/host/wire/reference-types.js';
import { loadVectors } from './vectors.js';

const SEED = 20261202;
const vectors = loadVectors();

function tree(text: string): unknown {
  const parsed = parseWire(text);
  if ('error' in parsed) throw new Error(parsed.error);
  return parsed.tree;
}

function ok(result: ReturnType<typeof reserialize.envelope>) {
  if (!result.ok) throw new Error(result.reason);
  return result;
}

const RESERIALIZER_OF: Record<string, (input: unknown) => ReturnType<typeof reserialize.envelope>> = {
  native: reserialize.envelope,
  'control.request': reserialize.signedControlRequest,
  'control.response': reserialize.signedControlResponse,
};

function reserializerFor(name: string) {
  const prefix = Object.keys(RESERIALIZER_OF).find((key) => name.startsWith(key))!;
  return RESERIALIZER_OF[prefix]!;
}

const action = (extra: Record<string, unknown> = {}) => ({ id: 'act_1', capability_id: 'cap:x', input: { n: 1.5 }, ...extra });

describe('reserialize: the reference vectors are fixed points', () => {
  it.each(vectors.map((vector) => [vector.name, vector] as const))('%s re-serialises to its own bytes', (_name, vector) => {
    const result = ok(reserializerFor(vector.name)(tree(vector.documentText)));
    expect(wireJson(result.tree)).toBe(vector.documentText);
  });

  it('the approval record inside the approved action is a fixed point of ApprovalRecord', () => {
    const text = vectors.find((vector) => vector.name === 'native.request.approved_action')!.documentText;
    const start = text.indexOf('"approval_authorization":') + '"approval_authorization":'.length;
    const record = (tree(text) as any).security.connector_route.approval_authorization;
    const recordText = wireJson(record);
    expect(text.slice(start, start + recordText.length)).toBe(recordText);
    expect(wireJson(ok(reserialize.approvalRecord(record)).tree)).toBe(recordText);
  });
});

describe('reserialize: what the typed parse changes', () => {
  it('drops unknown fields in typed objects, keeps them in free-form ones', () => {
    const result = ok(reserialize.action(action({ extra: 1, input: { extra: 2 }, identity: { tenant: { id: 't', nope: 3 } } })));
    expect(result.value).toEqual({ id: 'act_1', capability_id: 'cap:x', input: { extra: 2 }, identity: { tenant: { id: 't' } } });
  });

  it('omits None options (null or absent) and empty skip-if-empty lists, keeps nullable options as null', () => {
    const result = ok(reserialize.actionResult({ action_id: 'act_1', status: 'completed', message: [], output: null, error: null }));
    expect(wireJson(result.tree)).toBe('{"action_id":"act_1","status":"completed"}');
    const record = (tree(vectors.find((vector) => vector.name === 'native.request.approved_action')!.documentText) as any).security.connector_route
      .approval_authorization;
    const decisions = record.decisions.map((decision: any) => ({ ...decision, authority: { ...decision.authority, tenant_id: undefined } }));
    const written = ok(reserialize.approvalRecord({ ...record, decisions })).value as any;
    expect(written.decisions[0].authority.tenant_id).toBeNull();
    expect(written.decisions[0].authority.roles).toEqual([]);
  });

  it('writes fields in declaration order and fills serde defaults', () => {
    const result = ok(
      reserialize.manifest({
        profiles: ['aip.native.http.v1'],
        agent: { kind: 'service', id: 'svc' },
        manifest_version: '1.0',
        capabilities: [
          {
            id: 'cap:x',
            name: 'x',
            kind: 'tool',
            input_schema: {},
            contract: {
              idempotency: { requirement: 'optional', collision_behavior: 'reject_conflict', key_scope: 'action' },
              execution: {
                supports_sync: true,
                supports_async: false,
                supports_streaming: false,
                supports_cancel: false,
                supports_retry: true,
                expected_completion: 'sync',
                retry_safety: 'safe',
              },
              data: { sensitivity: 'internal', contains_pii: false, redaction_required: false },
              approval: { required: true, approver_selector: { type: 'tenant_policy' } },
            },
          },
        ],
      }),
    );
    const text = wireJson(result.tree);
    expect(text.startsWith('{"manifest_version":"1.0","agent":{"id":"svc","kind":"service"},"capabilities":')).toBe(true);
    expect(text).toContain(
      '"approval":{"required":true,"approver_selector":{"type":"tenant_policy"},"minimum_distinct_principals":1,"separation_of_duties":{"requester_must_differ":false,"operator_must_differ":false,"allow_self_approval":false}}',
    );
  });

  it('trims RFC 3339 timestamps, normalises time arrays and sorts sets', () => {
    const decision = {
      approval_id: 'appr_1',
      decision: 'approved',
      approver: { id: 'human:a', kind: 'human' },
      decided_at: '2026-12-01t21:00:00.120000Z',
    };
    expect((ok(reserialize.approvalDecision(decision)).value as any).decided_at).toBe('2026-12-01T21:00:00.12Z');
    const lease = { request_id: 'msg_1', issued_at: '2026-12-01T21:00:00.000Z', expires_at: '2026-12-01T21:00:30Z', signer_did: 'did:key:z' };
    const response = ok(
      reserialize.controlResponse({ ...lease, outcome: { status: 'lease', lease: { sequence: 2, expires_at: [2026, 335, 23, 0, 0, 0, 2, -30, 0] } } }),
    );
    expect(response.value).toEqual({
      ...lease,
      issued_at: '2026-12-01T21:00:00Z',
      outcome: { status: 'lease', lease: { sequence: 2, expires_at: [2026, 335, 23, 0, 0, 0, 2, 30, 0] } },
    });
    const record = (tree(vectors.find((vector) => vector.name === 'native.request.approved_action')!.documentText) as any).security.connector_route
      .approval_authorization;
    const decisions = [{ ...record.decisions[0], authority: { ...record.decisions[0].authority, roles: ['b', 'a', 'é', 'b', 'Z'] } }];
    expect((ok(reserialize.approvalRecord({ ...record, decisions })).value as any).decisions[0].authority.roles).toEqual(['Z', 'a', 'b', 'é']);
  });

  it('keeps number lexemes of free-form values and refuses floats in integer fields', () => {
    const result = ok(reserialize.streamChunk(tree('{"action_id":"act_1","sequence":3,"kind":"data","data":{"x":1000.0,"y":1e3}}')));
    expect(canonicalJson(result.tree)).toBe('{"action_id":"act_1","data":{"x":1000.0,"y":1000.0},"kind":"data","sequence":3}');
    for (const sequence of ['3.0', '-1', '1e2', '18446744073709551616', '"3"', 'null']) {
      expect(reserialize.streamChunk(tree(`{"action_id":"act_1","sequence":${sequence},"kind":"data"}`)).ok, sequence).toBe(false);
    }
    expect(ok(reserialize.streamChunk(tree('{"action_id":"act_1","sequence":18446744073709551615,"kind":"data"}'))).tree).toMatchObject({ kind: 'data' });
  });

  it('refuses what serde refuses', () => {
    const refused: Array<[string, ReturnType<typeof reserialize.envelope>]> = [
      ['missing required field', reserialize.action({ id: 'act_1', capability_id: 'cap:x' })],
      ['unknown enum variant', reserialize.action(action({ mode: 'later' }))],
      ['null for a list', reserialize.actionResult({ action_id: 'a', status: 'completed', message: null })],
      ['bad timestamp', reserialize.approvalDecision({ approval_id: 'a', decision: 'approved', approver: { id: 'h', kind: 'human' }, decided_at: 'now' })],
      ['string time array', reserialize.controlResponse({ request_id: 'm', issued_at: 'x', expires_at: 'x', signer_did: 'd', outcome: { status: 'offline' } })],
      [
        'two body keys',
        reserialize.envelope({
          aip_version: '1.0',
          message_type: 'aip.core.v1.action',
          message_id: 'm',
          sent_at: '2026-12-01T21:00:00Z',
          body: { action: action(), cancel: {} },
        }),
      ],
      [
        'unknown tag',
        reserialize.controlRequest({
          request_id: 'm',
          issued_at: '2026-12-01T21:00:00Z',
          expires_at: '2026-12-01T21:00:01Z',
          signer_did: 'd',
          command: { operation: 'reboot', payload: {} },
        }),
      ],
      [
        'session cancel target shape',
        reserialize.envelope({
          aip_version: '1.0',
          message_type: 'aip.core.v1.cancel',
          message_id: 'm',
          sent_at: '2026-12-01T21:00:00Z',
          body: { cancel: { target: 'act_1' } },
        }),
      ],
    ];
    for (const [label, result] of refused) expect(result.ok, label).toBe(false);
  });

  it('re-serialising twice changes nothing (fixed point) for any action input', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.option(fc.constantFrom('sync', 'async', 'streaming'), { nil: undefined }), (input, mode) => {
        const once = ok(reserialize.action(tree(wireJson(action({ input, mode })))));
        const twice = ok(reserialize.action(tree(wireJson(once.tree))));
        expect(wireJson(twice.tree)).toBe(wireJson(once.tree));
      }),
      { seed: SEED, numRuns: 300 },
    );
  });
});
