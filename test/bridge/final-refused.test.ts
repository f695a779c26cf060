/**
 * A final result Herm refuses with a 4xx. When the same result would be refused again (a gone
 * session, a body Herm will not take), the job is done with no final result held, and recover()
 * leaves it alone; after a 401/403 (a credential an operator can fix) it stays unfinished and the
 * next recover() posts it again.
 */
import { describe, expect, it } from 'vitest';
import { acceptedFinals, bridgeEnvFactory, callTool, newSessionId, postsOf, scripts } from '../helpers/bridge-env.js';

const startEnv = bridgeEnvFactory();
const refusal = (status: number) => ({ status, body: JSON.stringify({ error: { type: 'invalid_request_error', message: 'refused', retryable: false } }) });

describe('a final result refused with a 4xx', () => {
  it.each([400, 404, 409, 410, 413, 422])('HTTP %i: the job is done with no final result, posted once, and recover() leaves it', async (status) => {
    const { herm, hermes, bridge, ledger } = await startEnv();
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: scripts.held(150, 'Rendered.') });
    const job = await bridge.handleEvent(sessionId, use);
    expect(job).toMatchObject({ kickoff: 'accepted' });
    herm.injectFault(refusal(status)); // the next request to Herm is the final result
    await bridge.idle();

    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'done', final_status: null, final_event_id: null });
    await bridge.recover();
    await bridge.idle();
    expect(postsOf(herm, sessionId, use.tool_use_id, 'final')).toHaveLength(1);
    expect(acceptedFinals(herm, sessionId, use.tool_use_id)).toHaveLength(0);
    expect(hermes.startCount()).toBe(1);
  });

  it.each([401, 403])('HTTP %i: the job stays unfinished, and the next recover() posts the final result again', async (status) => {
    const { herm, hermes, bridge, ledger } = await startEnv();
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: scripts.held(150, 'Rendered.') });
    await bridge.handleEvent(sessionId, use);
    herm.injectFault(refusal(status));
    await bridge.idle();
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'running', final_status: null });

    await bridge.recover();
    await bridge.idle();
    expect(postsOf(herm, sessionId, use.tool_use_id, 'final')).toHaveLength(2);
    expect(acceptedFinals(herm, sessionId, use.tool_use_id)).toHaveLength(1);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'done', final_status: 'completed' });
    expect(hermes.startCount()).toBe(1);
  });
});
