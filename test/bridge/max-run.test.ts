/**
 * maxRunMs bounds how long the bridge follows one run: past it, the model is told the run did
 * not finish in time (failed, never completed), and the run itself is left alone in Hermes.
 */
import { describe, expect, it } from 'vitest';
import { bridgeEnvFactory, callTool, hermesRunRequests, newSessionId, oneFailedFinal, postedResults } from '../helpers/bridge-env.js';

const startEnv = bridgeEnvFactory();

describe('maxRunMs', () => {
  it('a run still going past maxRunMs: final failed saying it may still be running; the run is not stopped', async () => {
    const { herm, hermes, bridge, ledger } = await startEnv({ bridge: { maxRunMs: 300 } });
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, {
      prompt: 'Render',
      sim_script: [
        { type: 'delta', text: 'Rendering' },
        { type: 'sleep', ms: 60_000 },
        { type: 'complete', output: 'late' },
      ],
    });
    const job = await bridge.handleEvent(sessionId, use);
    const runId = job?.run_id as string;
    await bridge.idle();

    expect(postedResults(herm, sessionId).map((posted) => posted.status)).toEqual(['running', 'failed']);
    const text = oneFailedFinal(herm, sessionId, use.tool_use_id);
    expect(text).toContain(runId);
    expect(text).toContain('may still be running');
    expect(hermesRunRequests(hermes, runId, '/stop')).toHaveLength(0);
    expect(hermes.run(runId)?.status).toBe('running');
    expect(herm.continuations(sessionId, use.tool_use_id)).toBe(1);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'done', final_status: 'failed' });
  });
});
