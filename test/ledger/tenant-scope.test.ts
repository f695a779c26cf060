import { describe, expect, it } from 'vitest';
import { harnessFactory, nextId, script } from '../helpers/harness.js';

const harness = harnessFactory();

describe('idempotency keys are scoped per verified tenant', () => {
  it('on an endpoint shared by tenants, the same key from another tenant never replays the first tenant result', async () => {
    const h = await harness();
    const key = nextId('shared-key');
    const input = { body: { input: 'hello', sim_script: script.quick() } };
    const a = await h.invoke({ capability_id: h.cap('run_start'), input, idempotency_key: key }, { tenantId: 'tenant-a' });
    const b = await h.invoke({ capability_id: h.cap('run_start'), input, idempotency_key: key }, { tenantId: 'tenant-b' });
    expect(a.status).toBe('completed');
    expect(b.status).toBe('completed');
    expect(b.receipt?.replayed).toBeUndefined();
    expect((b.output as { run_id: string }).run_id).not.toBe((a.output as { run_id: string }).run_id);
    expect(h.sim.startCount()).toBe(2);

    const again = await h.invoke({ capability_id: h.cap('run_start'), input, idempotency_key: key }, { tenantId: 'tenant-a' });
    expect(again.receipt).toMatchObject({ replayed: true, original_action_id: a.action_id });
    expect(h.sim.startCount()).toBe(2);
  });
});

describe('cancel() of a replayed run_start', () => {
  it('stops the run the original action started', async () => {
    const h = await harness();
    const key = nextId('key');
    const input = { body: { input: 'long', sim_script: script.long() } };
    const first = await h.invoke({ capability_id: h.cap('run_start'), input, idempotency_key: key });
    const replayAction = { id: nextId('act'), capability_id: h.cap('run_start'), input, idempotency_key: key };
    const replay = await h.invoke(replayAction);
    expect(replay.receipt?.replayed).toBe(true);
    const runId = (first.output as { run_id: string }).run_id;

    const stopped = await h.cancel(replayAction);
    expect(stopped?.status, JSON.stringify(stopped?.error)).toBe('completed');
    expect(stopped?.output).toEqual({ run_id: runId, status: 'stopping' });
    expect(h.sim.requests.filter((request) => request.method === 'POST' && request.path === `/v1/runs/${runId}/stop`)).toHaveLength(1);
  });
});
