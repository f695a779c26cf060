/**
 * Shutdown: close() stops following runs without posting anything it does not know, leaves
 * the unfinished jobs to recover(), refuses new events, and can be called more than once.
 */
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/harness.js';
import { acceptedFinals, bridgeEnvFactory, callTool, hermesRunRequests, newSessionId, postedResults, scripts } from '../helpers/bridge-env.js';

const startEnv = bridgeEnvFactory();

describe('bridge.close()', () => {
  it('mid-run: posts no final result, leaves the job unfinished, and a restarted bridge recovers it once', async () => {
    const env = await startEnv();
    const { herm, hermes, bridge, ledger } = env;
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: scripts.held(400, 'Rendered after a graceful restart.') });
    const job = await bridge.handleEvent(sessionId, use);
    const runId = job?.run_id as string;
    await eventually(() => hermesRunRequests(hermes, runId, '/events').length === 1, 'the bridge follows the run');
    await bridge.close();
    await bridge.idle();

    expect(postedResults(herm, sessionId).map((posted) => posted.status)).toEqual(['running']);
    const left = await ledger.job(sessionId, use.tool_use_id);
    expect(left).toMatchObject({ state: 'running', kickoff: 'accepted', final_status: null });
    // Its lease was given up, so a bridge with another id need not wait for it to expire.
    expect(left?.lease_expires_at).toBeLessThanOrEqual(Date.now());
    await expect(bridge.handleEvent(sessionId, use)).rejects.toThrow(/closed/);

    const next = env.restart(ledger);
    await next.bridge.recover();
    await next.bridge.idle();
    const finals = acceptedFinals(herm, sessionId, use.tool_use_id);
    expect(finals).toHaveLength(1);
    expect(finals[0]).toMatchObject({ status: 'completed', content: [{ type: 'text', text: 'Rendered after a graceful restart.' }] });
    expect(herm.continuations(sessionId, use.tool_use_id)).toBe(1);
    expect(hermes.startCount()).toBe(1);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'done', final_status: 'completed' });
  });

  it('is idempotent, like the connector close()', async () => {
    const { connector, bridge } = await startEnv();
    await connector.close();
    await expect(connector.close()).resolves.toBeUndefined();
    await bridge.close();
    await expect(bridge.close()).resolves.toBeUndefined();
  });
});
