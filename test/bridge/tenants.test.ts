/**
 * Bridges of two tenants on one shared ledger: jobs are per tenant like bindings and keys. Two
 * tenants' Herm sessions may use the same session and tool-use ids; each gets its own job and its
 * own run, recover() takes only its own tenant's jobs, and looks evidence up in its own tenant
 * (two tenants binding the same action id must not leave a job unfinished for ever).
 */
import { describe, expect, it } from 'vitest';
import type { BridgeJob, RunLedger } from 'aip-connector-hermes-agent';
import { startHermSimulator } from 'aip-connector-hermes-agent/simulator';
import { idempotencyKeyOf } from '../../src/bridge/bridge.js';
import { jobOf } from '../helpers/bridge-jobs.js';
import { LEDGER_BACKENDS } from '../helpers/ledgers.js';
import { HERM_KEY, acceptedFinals, bridgeEnvFactory, bridgeFor, callTool, connectorFor, hermesStarts, newSessionId, scripts } from '../helpers/bridge-env.js';

const startEnv = bridgeEnvFactory();
const A = { tenantId: 'tenant-a' };
const B = { tenantId: 'tenant-b' };

/** The record a bridge of `tenantId` leaves when its process stops right after sending the start. */
function stoppedDuringStart(sessionId: string, toolUseId: string, tenantId: string, prompt: string): BridgeJob {
  const key = idempotencyKeyOf(sessionId, toolUseId);
  const ids = { session_id: sessionId, tool_use_id: toolUseId, action_id: `herm_${key.slice('herm-'.length, 'herm-'.length + 32)}`, idempotency_key: key };
  return jobOf({ ...ids, tenant_id: tenantId, tool_input: { prompt }, lease_owner: null, lease_expires_at: null });
}

describe.each(LEDGER_BACKENDS)('bridges of two tenants on one ledger ($name)', (backend) => {
  const envFor = async (): Promise<{ env: Awaited<ReturnType<typeof startEnv>>; ledger: RunLedger }> => {
    const { ledger } = await backend.create();
    return { env: await startEnv({ ledger, bridge: { context: A } }), ledger };
  };

  it('the same session and tool-use id in two tenants: two jobs, two runs, each result to its own Herm', async () => {
    const { env, ledger } = await envFor();
    const hermB = await startHermSimulator({ apiKey: HERM_KEY, keepaliveMs: 200 });
    const connectorB = connectorFor(env.hermes, ledger);
    const bridgeB = bridgeFor(hermB, connectorB, ledger, { context: B });
    try {
      const sessionId = newSessionId();
      const useA = callTool(env.herm, sessionId, { prompt: 'Render A', sim_script: scripts.quick('A rendered') }, 'toolu_shared');
      const useB = callTool(hermB, sessionId, { prompt: 'Render B', sim_script: scripts.quick('B rendered') }, 'toolu_shared');
      await env.bridge.handleEvent(sessionId, useA);
      const jobB = await bridgeB.handleEvent(sessionId, useB);
      await Promise.all([env.bridge.idle(), bridgeB.idle()]);

      expect(hermesStarts(env.hermes)).toHaveLength(2);
      expect(acceptedFinals(env.herm, sessionId, 'toolu_shared')).toMatchObject([{ status: 'completed', content: [{ text: 'A rendered' }] }]);
      expect(acceptedFinals(hermB, sessionId, 'toolu_shared')).toMatchObject([{ status: 'completed', content: [{ text: 'B rendered' }] }]);
      const [storedA, storedB] = [await ledger.job(sessionId, 'toolu_shared', 'tenant-a'), await ledger.job(sessionId, 'toolu_shared', 'tenant-b')];
      expect(storedA).toMatchObject({ tenant_id: 'tenant-a', state: 'done', final_status: 'completed' });
      expect(storedB).toMatchObject({ tenant_id: 'tenant-b', state: 'done', final_status: 'completed', run_id: jobB?.run_id });
      expect(storedA?.run_id).not.toBe(storedB?.run_id);
      expect(await ledger.job(sessionId, 'toolu_shared')).toBeNull();
    } finally {
      await bridgeB.close();
      await connectorB.close();
      await hermB.close();
    }
  });

  it("recover() finds its own tenant's run when another tenant bound the same action id, and finishes the job", async () => {
    const { env, ledger } = await envFor();
    const sessionId = newSessionId();
    const use = callTool(env.herm, sessionId, { prompt: 'Render A' }, 'toolu_a');
    const job = stoppedDuringStart(sessionId, use.tool_use_id, 'tenant-a', 'Render A');
    await ledger.createJob(job);
    const start = (key: string, output: string) => ({
      id: job.action_id,
      capability_id: env.cap('run_start'),
      input: { body: { input: 'Render', sim_script: scripts.quick(output) } },
      idempotency_key: key,
    });
    // The start the stopped process sent, and another tenant's action that happens to use the same id.
    const startedA = await env.connector.invoke(start(job.idempotency_key, 'A rendered'), A);
    await env.connector.invoke(start('tenant-b-key', 'B rendered'), B);
    expect(startedA.status).toBe('completed');

    await env.bridge.recover();
    await env.bridge.idle();
    expect(acceptedFinals(env.herm, sessionId, use.tool_use_id)).toMatchObject([{ status: 'completed', content: [{ text: 'A rendered' }] }]);
    expect(await ledger.job(sessionId, use.tool_use_id, 'tenant-a')).toMatchObject({
      state: 'done',
      run_id: (startedA.output as { run_id: string }).run_id,
    });
  });

  it("recover() leaves another tenant's unfinished jobs alone", async () => {
    const { env, ledger } = await envFor();
    const sessionId = newSessionId();
    const other = stoppedDuringStart(sessionId, 'toolu_b', 'tenant-b', 'Render B');
    await ledger.createJob(other);
    await env.bridge.recover();
    await env.bridge.idle();
    expect(await ledger.job(sessionId, 'toolu_b', 'tenant-b')).toEqual(other);
    expect(env.hermes.requests).toHaveLength(0);
    expect(env.herm.requests).toHaveLength(0);
  });
});
