/**
 * 410 response_expired on the kickoff: the session stopped waiting for the call. The running
 * result is never retried, the job records that the kickoff expired, and the final result is
 * still posted when the run ends (Herm appends it as a new event, starting one turn).
 */
import { describe, expect, it } from 'vitest';
import {
  acceptedFinals,
  acceptedRunning,
  bridgeEnvFactory,
  callTool,
  newSessionId,
  oneFailedFinal,
  postedResults,
  postsOf,
  scripts,
} from '../helpers/bridge-env.js';

const startEnv = bridgeEnvFactory();
const OUTPUT = 'Render completed; nobody was waiting, but here it is.';

describe('410 response_expired on the kickoff', () => {
  it('is not retried, is recorded as expired, and the final result is still appended when the run ends', async () => {
    const { herm, hermes, bridge, ledger } = await startEnv();
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: scripts.held(100, OUTPUT) });
    herm.expire(sessionId, use.tool_use_id);
    expect(herm.toolCall(sessionId, use.tool_use_id)?.state).toBe('expired');

    const job = await bridge.handleEvent(sessionId, use);
    expect(job).toMatchObject({ kickoff: 'expired', kickoff_event_id: null });
    expect(hermes.startCount()).toBe(1);
    const runId = job?.run_id as string;
    await bridge.idle();

    // Exactly one running POST (answered 410), then the final.
    expect(postedResults(herm, sessionId).map((posted) => posted.status)).toEqual(['running', 'completed']);
    expect(postsOf(herm, sessionId, use.tool_use_id, 'running')).toHaveLength(1);
    expect(acceptedRunning(herm, sessionId, use.tool_use_id)).toHaveLength(0);

    const finals = acceptedFinals(herm, sessionId, use.tool_use_id);
    expect(finals).toHaveLength(1);
    expect(finals[0]).toMatchObject({ tool_use_id: use.tool_use_id, status: 'completed', is_error: false, content: [{ type: 'text', text: OUTPUT }] });
    // Appended as a new event (no running result to replace), and it started one turn.
    expect(herm.history(sessionId)).toEqual(finals);
    expect(herm.toolCall(sessionId, use.tool_use_id)).toEqual({
      session_id: sessionId,
      tool_use_id: use.tool_use_id,
      state: 'completed',
      final_event_id: finals[0]?.id,
    });
    expect(herm.continuations(sessionId, use.tool_use_id)).toBe(1);

    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({
      run_id: runId,
      kickoff: 'expired',
      kickoff_event_id: null,
      state: 'done',
      final_status: 'completed',
      final_event_id: finals[0]?.id,
    });
    expect(hermes.startCount()).toBe(1);
  });

  it('a failed run after an expired kickoff is appended as failed', async () => {
    const { herm, bridge, ledger } = await startEnv();
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, {
      prompt: 'Render',
      sim_script: [
        { type: 'delta', text: 'x' },
        { type: 'sleep', ms: 50 },
        { type: 'fail', error: 'encoder crashed' },
      ],
    });
    herm.expire(sessionId, use.tool_use_id);
    const job = await bridge.handleEvent(sessionId, use);
    await bridge.idle();
    expect(postsOf(herm, sessionId, use.tool_use_id, 'running')).toHaveLength(1);
    expect(oneFailedFinal(herm, sessionId, use.tool_use_id)).toContain(job?.run_id as string);
    expect(herm.continuations(sessionId, use.tool_use_id)).toBe(1);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ kickoff: 'expired', state: 'done', final_status: 'failed' });
  });
});
