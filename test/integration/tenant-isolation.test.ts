/**
 * Two tenants on one shared endpoint (no endpoint tenant binding): AIP callers choose action
 * ids and idempotency keys, so tenants collide on both. Bindings, evidence, cancel() and the
 * key Hermes sees must all stay per tenant, on every ledger backend.
 */
import { describe, expect, it } from 'vitest';
import { AmbiguousEvidenceError, createHermesConnector, type AipActionResult } from 'aip-connector-hermes-agent';
import { API_KEY, ENDPOINT, eventually, harnessFactory, nextId, script } from '../helpers/harness.js';
import { LEDGER_BACKENDS } from '../helpers/ledgers.js';
import { providerKeyOf } from '../helpers/provider-key.js';

const harness = harnessFactory();
const A = { tenantId: 'tenant-a' };
const B = { tenantId: 'tenant-b' };
const runIdOf = (result: AipActionResult) => (result.output as { run_id: string }).run_id;

describe.each(LEDGER_BACKENDS)('run bindings are per tenant: $name', (backend) => {
  it('the same action id from two tenants keeps two bindings; evidence() and cancel() never cross', async () => {
    const { ledger } = await backend.create();
    const h = await harness({ connector: { ledger } });
    const actionId = nextId('shared-act');
    const input = { body: { input: 'long', sim_script: script.long() } };
    const start = (context: typeof A) =>
      h.connector.invoke({ id: actionId, capability_id: h.cap('run_start'), input, idempotency_key: nextId('key') }, context);
    const runA = runIdOf(await start(A));
    const runB = runIdOf(await start(B));
    expect(runA).not.toBe(runB);

    expect(await h.connector.evidence(actionId, A)).toMatchObject({ action_id: actionId, tenant_id: 'tenant-a', run_id: runA });
    expect(await h.connector.evidence(actionId, B)).toMatchObject({ action_id: actionId, tenant_id: 'tenant-b', run_id: runB });
    expect(await h.connector.evidence(actionId, { tenantId: null })).toBeNull();
    await expect(h.connector.evidence(actionId)).rejects.toBeInstanceOf(AmbiguousEvidenceError);
    // A run id is one tenant's: unambiguous without a tenant, invisible to the other tenant.
    expect(await h.connector.evidence(runA)).toMatchObject({ tenant_id: 'tenant-a' });
    expect(await h.connector.evidence(runA, B)).toBeNull();

    const stopped = await h.connector.cancel({ id: actionId, capability_id: h.cap('run_start'), input }, A);
    expect(stopped?.status, JSON.stringify(stopped?.error)).toBe('completed');
    const stops = h.sim.requests.filter((request) => request.method === 'POST' && request.path.endsWith('/stop'));
    expect(stops.map((request) => [request.path, request.headers['x-aip-tenant-id']])).toEqual([[`/v1/runs/${runA}/stop`, 'tenant-a']]);
    expect(h.sim.run(runB)?.status).not.toMatch(/stopping|cancelled/);
  });

  it("a status read by one tenant never updates another tenant's binding of the same action id", async () => {
    const { ledger } = await backend.create();
    const h = await harness({ connector: { ledger } });
    const actionId = nextId('shared-act');
    const quick = { body: { input: 'hi', sim_script: script.quick() } };
    const long = { body: { input: 'long', sim_script: script.long() } };
    const runA = runIdOf(await h.connector.invoke({ id: actionId, capability_id: h.cap('run_start'), input: quick, idempotency_key: nextId('key') }, A));
    await h.connector.invoke({ id: actionId, capability_id: h.cap('run_start'), input: long, idempotency_key: nextId('key') }, B);
    // Tenant B reads A's run: Hermes answers, but the evidence is A's alone.
    await eventually(() => h.sim.run(runA)?.status === 'completed' || undefined, 'run A completed');
    const read = await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: runA } }, B);
    expect(read.output).toMatchObject({ status: 'completed' });
    expect(await h.connector.evidence(actionId, A)).toMatchObject({ last_status: 'started' });
    await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: runA } }, A);
    expect(await h.connector.evidence(actionId, A)).toMatchObject({ last_status: 'completed' });
    expect(await h.connector.evidence(actionId, B)).toMatchObject({ last_status: 'started' });
  });
});

describe('evidence() options', () => {
  it('refuses an empty or non-string tenantId with a TypeError', async () => {
    const h = await harness();
    await expect(h.connector.evidence('x', { tenantId: '' })).rejects.toBeInstanceOf(TypeError);
    await expect(h.connector.evidence('x', { tenantId: 7 as unknown as string })).rejects.toBeInstanceOf(TypeError);
  });

  it('an empty tenantId in the execution context is invalid_input, before anything is claimed or sent', async () => {
    const h = await harness();
    const result = await h.invoke({ capability_id: h.cap('run_start'), input: { body: { input: 'hi' } }, idempotency_key: nextId('key') }, { tenantId: '' });
    expect(result.error?.code).toBe('connector.hermes_agent.invalid_input');
    expect(h.sim.requests).toHaveLength(0);
  });
});

describe('the Idempotency-Key Hermes sees is scoped like the ledger', () => {
  it('is aip1-<sha256 of [tenant, capability, key]>, never the raw key', async () => {
    const h = await harness();
    const key = nextId('order');
    await h.invoke({ capability_id: h.cap('run_start'), input: { body: { input: 'hi' } }, idempotency_key: key }, A);
    await h.invoke({ capability_id: h.cap('run_start'), input: { body: { input: 'hi' } }, idempotency_key: key });
    const sent = h.sim.requests.map((request) => request.headers['idempotency-key']);
    expect(sent).toEqual([providerKeyOf(h.cap('run_start'), key, 'tenant-a'), providerKeyOf(h.cap('run_start'), key)]);
  });

  it("a Hermes that honours keys never replays tenant A's run to tenant B", async () => {
    const h = await harness({ simulator: { profile: 'later' } });
    const key = nextId('shared-key');
    const input = { body: { input: 'hi', sim_script: script.quick() } };
    const a = await h.invoke({ capability_id: h.cap('run_start'), input, idempotency_key: key }, A);
    const b = await h.invoke({ capability_id: h.cap('run_start'), input, idempotency_key: key }, B);
    expect(runIdOf(b)).not.toBe(runIdOf(a));
    expect(b.receipt?.replayed).toBeUndefined();
    expect(h.sim.startCount()).toBe(2);
  });

  it('a replay Hermes answers from its own record shows in the receipt as replayed_by provider', async () => {
    const h = await harness({ simulator: { profile: 'later' } });
    // A second connector (another process, its own memory ledger) sends the same tenant, key and body.
    const other = createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: h.sim.url, apiKey: API_KEY }] });
    try {
      const key = nextId('key');
      const input = { body: { input: 'hi', sim_script: script.quick() } };
      const first = await h.invoke({ capability_id: h.cap('run_start'), input, idempotency_key: key }, A);
      expect(first.receipt?.replayed).toBeUndefined();
      const second = await other.invoke({ id: nextId(), capability_id: h.cap('run_start'), input, idempotency_key: key }, A);
      expect(runIdOf(second)).toBe(runIdOf(first));
      expect(second.receipt).toMatchObject({ replayed: true, replayed_by: 'provider' });
      expect(h.sim.startCount()).toBe(1);
    } finally {
      await other.close();
    }
  });

  it('a replay from the connector ledger says replayed_by connector', async () => {
    const h = await harness();
    const key = nextId('key');
    const input = { body: { input: 'hi' } };
    const first = await h.invoke({ capability_id: h.cap('run_start'), input, idempotency_key: key });
    const again = await h.invoke({ capability_id: h.cap('run_start'), input, idempotency_key: key });
    expect(again.receipt).toMatchObject({ replayed: true, replayed_by: 'connector', original_action_id: first.action_id });
  });
});
