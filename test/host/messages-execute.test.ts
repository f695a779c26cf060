/**
 * Execution through the connector: the verified context (tenant, actor, deadline), async arriving
 * as sync, a connector failure as a 200 failed action_result, the result in the reference's
 * field order with nothing the Rust type would drop, approval records as single-use grants (and
 * a different record under an imported approval id refused), and a retry of one action id to
 * another replica starting one Hermes run.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { RunStep } from 'aip-connector-hermes-agent/simulator';
import { parseWire, wireJson } from '../../src/host/wire/json.js';
import { reserialize } from '../../src/host/wire/reference-types.js';
import { rfc3339 } from '../../src/host/wire/time.js';
import { DURABLE_BACKENDS } from '../helpers/ledgers.js';
import {
  actionEnvelope,
  actionId,
  approvalFor,
  API_KEY,
  cap,
  errorOf,
  gatewayPrincipal,
  type HostUnderTest,
  peerResponseProblem,
  resultOf,
  roundTrips,
  routeFor,
  sentEnvelope,
  signed,
  startHost,
  TENANT,
} from './messages-support.js';

const waitsForApproval = (): RunStep[] => [{ type: 'approval', command: 'rm -rf /tmp/demo' }, { type: 'tool', tool: 'terminal' }, { type: 'complete' }];

let host: HostUnderTest;
beforeAll(async () => {
  host = await startHost({ script: waitsForApproval });
});

async function startRun(target: HostUnderTest, key = `k-${actionId()}`): Promise<string> {
  const answer = await target.post(
    signed(actionEnvelope(target, { id: actionId(), capability_id: cap('run_start'), input: { body: { input: 'hello' } }, idempotency_key: key })),
  );
  expect(answer.status).toBe(200);
  return String((resultOf(answer).output as Record<string, unknown>).run_id);
}

describe('a completed action', () => {
  it('run_start → 200 signed action_result with the action id and the run; the context is the host’s, not the payload’s', async () => {
    const id = actionId();
    const text = signed(
      actionEnvelope(host, { id, capability_id: cap('run_start'), input: { body: { input: 'hello' } }, idempotency_key: 'k-ctx', timeout_ms: 20_000 }),
    );
    const before = Date.now();
    const answer = await host.post(text);
    expect(answer.status).toBe(200);
    expect(peerResponseProblem(answer, sentEnvelope(text))).toBeUndefined();
    expect(answer.json.message_type).toBe('aip.core.v1.action_result');
    expect(resultOf(answer)).toMatchObject({ action_id: id, status: 'completed', output: { run_id: expect.any(String) } });
    const start = host.sim.requests.filter((request) => request.path === '/v1/runs' && request.method === 'POST').at(-1);
    expect(start?.headers['x-aip-tenant-id']).toBe(TENANT);
    expect(start?.headers['x-aip-principal-id']).toBe(gatewayPrincipal.id);
    expect(start?.headers['x-aip-authentication-issuer']).toBe('connectors.test');
    expect(start?.headers['x-aip-trace-id']).toBe(sentEnvelope(text).correlation_id);
    // timeout_ms 20 s is below the contract's 60 s: the deadline is 20 s from admission.
    const deadline = Number(start?.headers['x-aip-deadline-unix-ms']);
    expect(deadline).toBeGreaterThanOrEqual(before + 20_000);
    expect(deadline).toBeLessThan(Date.now() + 20_000);
  });

  it('timeout_ms above the contract timeout is bounded by it (run_status: 60 s)', async () => {
    const before = Date.now();
    await host.post(signed(actionEnvelope(host, { id: actionId(), capability_id: cap('run_status'), input: { run_id: 'run_x' }, timeout_ms: 3_600_000 })));
    const read = host.sim.requests.filter((request) => request.path === '/v1/runs/run_x').at(-1);
    const deadline = Number(read?.headers['x-aip-deadline-unix-ms']);
    expect(deadline).toBeGreaterThanOrEqual(before + 60_000);
    expect(deadline).toBeLessThan(Date.now() + 60_000 + 1);
  });

  it('mode async arrives as sync: executed on this hop, 200 action_result', async () => {
    const runId = await startRun(host);
    const answer = await host.post(signed(actionEnvelope(host, { id: actionId(), capability_id: cap('run_status'), input: { run_id: runId }, mode: 'async' })));
    expect(answer.status).toBe(200);
    expect(resultOf(answer)).toMatchObject({ status: 'completed', output: { run_id: runId } });
  });

  it('the answer is the reference ActionResult: a fixed point of its re-serialisation, no receipt, no empty message list, no null', async () => {
    const runId = await startRun(host);
    for (const input of [{ run_id: 'run_gone' }, { run_id: runId }]) {
      const answer = await host.post(signed(actionEnvelope(host, { id: actionId(), capability_id: cap('run_status'), input })));
      const result = resultOf(answer);
      const typed = reserialize.actionResult(parseResult(answer.body));
      expect(typed.ok && wireJson(typed.tree)).toBe(wireJson(result));
      expect(roundTrips(answer.body)).toBe(true);
    }
    const answer = await host.post(signed(actionEnvelope(host, { id: actionId(), capability_id: cap('run_status'), input: { run_id: 'run_gone' } })));
    const result = resultOf(answer);
    expect(Object.keys(result)).toEqual(['action_id', 'status', 'error']);
    const order = ['code', 'message', 'category', 'retryable', 'retry_after_ms', 'details', 'source'];
    expect(Object.keys(result.error as object)).toEqual(order.filter((field) => field in (result.error as object)));
    expect(Object.keys(result.error as object)).toEqual(expect.arrayContaining(['code', 'message', 'category', 'retryable', 'details']));
    expect(answer.body).toBe(wireJson(JSON.parse(answer.body)));
    expect(answer.body).not.toMatch(/null|\[\]|"receipt"/);
  });
});

describe('a connector failure is a 200 failed action_result, not a 502', () => {
  it('run_status of a run Hermes does not know → 200, status failed, the connector’s typed error', async () => {
    const answer = await host.post(signed(actionEnvelope(host, { id: actionId(), capability_id: cap('run_status'), input: { run_id: 'run_gone' } })));
    expect(answer.status).toBe(200);
    expect(resultOf(answer)).toMatchObject({
      status: 'failed',
      error: { code: 'connector.hermes_agent.not_found', category: 'permanent', retryable: false, details: { remote_status: 404 } },
    });
  });
});

function approvedAction(target: HostUnderTest, input: Record<string, unknown>, approval?: ReturnType<typeof approvalFor>, id = actionId()) {
  const action: Record<string, unknown> = { id, capability_id: cap('run_approval'), input, idempotency_key: `k-${id}` };
  const { record, decision } = approval ?? approvalFor(action);
  action.approval = decision;
  return { action, text: signed(actionEnvelope(target, action, { ...routeFor(target, id, cap('run_approval')), approval_authorization: record })), record };
}

describe('approval: the route’s record becomes the connector’s grant', () => {
  it('a matching record → 200: Hermes receives the approval (the grant was accepted, not refused as approval_required)', async () => {
    const runId = await startRun(host);
    await expect.poll(() => host.sim.run(runId)?.status).toBe('waiting_for_approval');
    const { text } = approvedAction(host, { run_id: runId, choice: 'once' });
    const answer = await host.post(text);
    expect(answer.status).toBe(200);
    expect(resultOf(answer)).toMatchObject({ status: 'completed' });
    expect(host.sim.requests.some((request) => request.path === `/v1/runs/${runId}/approval`)).toBe(true);
  });

  it('a record imported once, then a different record under the same approval id → 403 approval_authorization_conflict', async () => {
    const runId = await startRun(host);
    const first = approvedAction(host, { run_id: runId, choice: 'once' });
    expect((await host.post(first.text)).status).toBe(200);
    // Another action approved under the same approval id, with its own (valid) record: it conflicts with the imported one.
    const id = actionId();
    const approval = approvalFor({ id, capability_id: cap('run_approval') }, { approvalId: String((first.record.request as { id: string }).id) });
    const second = approvedAction(host, { run_id: runId, choice: 'once' }, approval, id);
    const answer = await host.post(second.text);
    expect(answer.status).toBe(403);
    expect(errorOf(answer)).toMatchObject({ code: 'connector_host.approval_authorization_conflict', category: 'auth', retryable: false });
  });

  it('the same record again (a retried action, a new message) is no conflict: the connector replays its outcome', async () => {
    const runId = await startRun(host);
    const first = approvedAction(host, { run_id: runId, choice: 'once' });
    const again = signed({ ...sentEnvelope(first.text), message_id: `msg_${actionId().slice(4)}`, sent_at: rfc3339(Date.now()) });
    expect((await host.post(first.text)).status).toBe(200);
    const replayed = await host.post(again);
    expect(replayed.status).toBe(200);
    expect(host.sim.requests.filter((request) => request.path === `/v1/runs/${runId}/approval`)).toHaveLength(1);
  });

  it.each([
    ['approval without a route record', (a: ReturnType<typeof approvedAction>) => ({ ...routeOf(a), approval_authorization: undefined })],
    ['a record for another tenant', (a: ReturnType<typeof approvedAction>) => ({ ...routeOf(a), approval_authorization: tenantChanged(a.record) })],
  ])('%s → 403 route_mismatch', async (_name, change) => {
    const approved = approvedAction(host, { run_id: 'run_x', choice: 'once' });
    const envelope = sentEnvelope(approved.text);
    const text = signed({ ...envelope, security: { ...envelope.security, connector_route: change(approved) } });
    const answer = await host.post(text);
    expect(answer.status).toBe(403);
    expect(errorOf(answer)).toMatchObject({ code: 'connector_host.route_mismatch' });
  });

  it('a route record with no approval on the action → 403 route_mismatch (unused authorization)', async () => {
    const approved = approvedAction(host, { run_id: 'run_x', choice: 'once' });
    const envelope = sentEnvelope(approved.text);
    const { approval: _decision, ...action } = (envelope.body as { action: Record<string, unknown> }).action;
    const answer = await host.post(signed({ ...envelope, body: { action } }));
    expect(answer.status).toBe(403);
    expect(errorOf(answer)).toMatchObject({ code: 'connector_host.route_mismatch', message: 'connector-host route carries unused approval authorization' });
  });
});

/** The action_result of an answer as parsed text (number lexemes kept), for the reference type. */
function parseResult(text: string): unknown {
  const parsed = parseWire(text);
  if ('error' in parsed) throw new Error(parsed.error);
  return ((parsed.tree as Record<string, unknown>).body as Record<string, unknown>).action_result;
}

function routeOf(approved: { text: string }): Record<string, unknown> {
  return (sentEnvelope(approved.text).security as { connector_route: Record<string, unknown> }).connector_route;
}

function tenantChanged(record: Record<string, unknown>): Record<string, unknown> {
  const request = record.request as Record<string, unknown>;
  return { ...record, request: { ...request, identity: { tenant: { id: 'tenant-other' } } } };
}

describe('a retry of one action id to another replica after a timeout', () => {
  it('run_start sent to replica 1 and, as a new message, to replica 2 at once: one Hermes run, both answer it', async () => {
    const store = await DURABLE_BACKENDS[0]!.create();
    const one = await startHost({ ledger: store.ledger, script: waitsForApproval });
    const two = await startHost({ ledger: store.open(), sim: one.sim, replicaId: 'crepl_hermes_acme_2' });
    const id = actionId();
    const action = { id, capability_id: cap('run_start'), input: { body: { input: 'once' } }, idempotency_key: `k-${id}` };
    const [first, second] = await Promise.all([one.post(signed(actionEnvelope(one, action))), two.post(signed(actionEnvelope(two, action)))]);
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(one.sim.startCount()).toBe(1);
    expect((resultOf(first).output as { run_id: string }).run_id).toBe((resultOf(second).output as { run_id: string }).run_id);
  });
});

describe('API key', () => {
  it('never appears in an answer', async () => {
    const answer = await host.post(signed(actionEnvelope(host, { id: actionId(), capability_id: cap('run_status'), input: { run_id: 'run_gone' } })));
    expect(answer.body).not.toContain(API_KEY);
  });
});
