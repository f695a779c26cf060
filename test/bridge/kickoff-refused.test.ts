/**
 * A kickoff Herm refuses with a 4xx other than 410 and 429: Herm answered, so the outcome is
 * known. The job records the refusal (not `unknown`), the kickoff is not sent again, and the
 * final result is still posted when the run ends.
 */
import { describe, expect, it } from 'vitest';
import { acceptedFinals, bridgeEnvFactory, callTool, newSessionId, postsOf, scripts } from '../helpers/bridge-env.js';

const startEnv = bridgeEnvFactory();

describe('a kickoff refused with a 4xx', () => {
  it.each([400, 401, 403, 404, 409, 422])('HTTP %i: recorded as rejected, sent once, and the final result still arrives', async (status) => {
    const { herm, hermes, bridge, ledger } = await startEnv();
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: scripts.held(50, 'Rendered.') });
    herm.injectFault({ status, body: JSON.stringify({ error: { type: 'invalid_request_error', message: 'refused', retryable: false } }) });

    const job = await bridge.handleEvent(sessionId, use);
    expect(job).toMatchObject({ kickoff: 'rejected', kickoff_event_id: null });
    await bridge.idle();

    expect(postsOf(herm, sessionId, use.tool_use_id, 'running')).toHaveLength(1);
    expect(acceptedFinals(herm, sessionId, use.tool_use_id)).toHaveLength(1);
    expect(hermes.startCount()).toBe(1);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ kickoff: 'rejected', state: 'done', final_status: 'completed' });
  });
});
