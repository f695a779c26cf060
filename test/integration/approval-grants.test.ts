/**
 * An AIP approval grant approves one action. Presented again by another action (another
 * idempotency key) within its window it is refused before Hermes is called; the approved
 * action's own replays and retries keep working.
 */
import { describe, expect, it } from 'vitest';
import { eventually, grantFor, harnessFactory, nextId, script, type Harness } from '../helpers/harness.js';
import { LEDGER_BACKENDS } from '../helpers/ledgers.js';

const harness = harnessFactory();
const PREFIX = 'connector.hermes_agent.';

async function waitingRun(h: Harness, approvals = 1): Promise<string> {
  const steps = Array.from({ length: approvals }, (_, index) => ({
    type: 'approval',
    command: `rm -rf ./scratch-${index}`,
    pattern_key: 'recursive delete',
    description: 'recursive delete',
  }));
  const runId = await h.startRun({ input: 'needs approval', sim_script: [...steps, { type: 'complete', output: 'done' }] });
  await eventually(() => h.sim.run(runId)?.pendingApprovals === 1 || undefined, 'an approval pending');
  return runId;
}

const posts = (h: Harness, suffix: string) => h.sim.requests.filter((request) => request.method === 'POST' && request.path.endsWith(suffix));

describe.each(LEDGER_BACKENDS)('approval grants are single-use: $name', (backend) => {
  it('run_approval: a second action presenting the same grant is approval_required and never reaches Hermes; the first action replays', async () => {
    const { ledger } = await backend.create();
    const h = await harness({ connector: { ledger } });
    const runId = await waitingRun(h, 2);
    const input = { run_id: runId, choice: 'once' };
    const grant = grantFor(input);
    const firstKey = nextId('key');
    const first = await h.invoke({ capability_id: h.cap('run_approval'), input, idempotency_key: firstKey }, { approval: grant });
    expect(first.status, JSON.stringify(first.error)).toBe('completed');
    await eventually(() => h.sim.run(runId)?.pendingApprovals === 1 || undefined, 'the second approval pending');

    const reused = await h.invoke({ capability_id: h.cap('run_approval'), input, idempotency_key: nextId('key') }, { approval: grant });
    expect(reused.status).toBe('failed');
    expect(reused.error).toMatchObject({ code: `${PREFIX}approval_required`, retryable: false, details: { original_action_id: first.action_id } });
    expect(reused.error?.message).toMatch(/already used by another action/);
    expect(posts(h, '/approval')).toHaveLength(1);
    expect(h.sim.run(runId)?.pendingApprovals).toBe(1);

    const replay = await h.invoke({ capability_id: h.cap('run_approval'), input, idempotency_key: firstKey }, { approval: grant });
    expect(replay.receipt).toMatchObject({ replayed: true, original_action_id: first.action_id });
    expect(posts(h, '/approval')).toHaveLength(1);

    // A fresh grant for the second approval is accepted.
    const second = await h.invoke({ capability_id: h.cap('run_approval'), input, idempotency_key: nextId('key') }, { approval: grantFor(input) });
    expect(second.status, JSON.stringify(second.error)).toBe('completed');
    expect(posts(h, '/approval')).toHaveLength(2);
  });

  it('run_stop: the same grant for a second stop action is refused; a grant id of another tenant is another grant', async () => {
    const { ledger } = await backend.create();
    const h = await harness({ connector: { ledger } });
    const runId = await h.startRun({ input: 'long', sim_script: script.long() });
    const input = { run_id: runId };
    const grant = grantFor(input);
    const first = await h.invoke({ capability_id: h.cap('run_stop'), input, idempotency_key: nextId('key') }, { approval: grant, tenantId: 'tenant-a' });
    expect(first.status, JSON.stringify(first.error)).toBe('completed');
    const reused = await h.invoke({ capability_id: h.cap('run_stop'), input, idempotency_key: nextId('key') }, { approval: grant, tenantId: 'tenant-a' });
    expect(reused.error?.code).toBe(`${PREFIX}approval_required`);
    expect(posts(h, '/stop')).toHaveLength(1);
    const otherTenant = await h.invoke({ capability_id: h.cap('run_stop'), input, idempotency_key: nextId('key') }, { approval: grant, tenantId: 'tenant-b' });
    expect(otherTenant.error?.code).not.toBe(`${PREFIX}approval_required`);
    expect(posts(h, '/stop')).toHaveLength(2);
  });

  it('an action whose first try certainly did nothing may present its grant again under the same key', async () => {
    const { ledger } = await backend.create();
    const h = await harness({ connector: { ledger } });
    const runId = await waitingRun(h);
    const input = { run_id: runId, choice: 'deny' };
    const grant = grantFor(input);
    const key = nextId('key');
    h.sim.injectFault({
      route: 'approval',
      response: { status: 401, body: '{"error":{"message":"Invalid API key","type":"invalid_request_error","code":"invalid_api_key"}}' },
    });
    const refused = await h.invoke({ capability_id: h.cap('run_approval'), input, idempotency_key: key }, { approval: grant });
    expect(refused.error?.code).toBe(`${PREFIX}authentication`);
    const retried = await h.invoke({ capability_id: h.cap('run_approval'), input, idempotency_key: key }, { approval: grant });
    expect(retried.status, JSON.stringify(retried.error)).toBe('completed');
  });
});

describe('cancel() needs no grant and spends none', () => {
  it('a host cancellation leaves the grant unused for the approved stop', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'long', sim_script: script.long() });
    const cancelled = await h.cancel({ capability_id: h.cap('run_events'), input: { run_id: runId } });
    expect(cancelled?.status, JSON.stringify(cancelled?.error)).toBe('completed');
    const input = { run_id: runId };
    const stop = await h.invoke({ capability_id: h.cap('run_stop'), input, idempotency_key: nextId('key') }, { approval: grantFor(input) });
    expect(stop.error?.code).not.toBe(`${PREFIX}approval_required`);
  });
});
