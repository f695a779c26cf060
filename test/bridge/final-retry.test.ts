/**
 * Retry safety. Final results are idempotent by (session, tool_use_id), so the bridge retries
 * them on 5xx, 429 and dropped responses, and Herm records exactly one. A kickoff is retried
 * only when Herm certainly did not take it (429); a 5xx leaves its outcome unknown, so it is
 * never sent again, and the final result still follows.
 */
import { describe, expect, it } from 'vitest';
import { acceptedFinals, acceptedRunning, bridgeEnvFactory, callTool, newSessionId, postedResults, postsOf, scripts } from '../helpers/bridge-env.js';

const startEnv = bridgeEnvFactory();
const OUTPUT = 'Render completed after the fault.';

describe('final result retries', () => {
  it('a 503 burst on the final post: retried until accepted, exactly one final result recorded', async () => {
    const { herm, hermes, bridge, ledger } = await startEnv();
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: scripts.held(100, OUTPUT) });
    const job = await bridge.handleEvent(sessionId, use);
    expect(job?.kickoff).toBe('accepted');
    // Armed after the kickoff was accepted: the next three POSTs (the final's) answer 503.
    herm.injectFault({ status: 503, times: 3 });
    await bridge.idle();

    expect(postedResults(herm, sessionId).map((posted) => posted.status)).toEqual(['running', 'completed', 'completed', 'completed', 'completed']);
    for (const posted of postsOf(herm, sessionId, use.tool_use_id, 'final')) expect(posted.text).toBe(OUTPUT);
    const finals = acceptedFinals(herm, sessionId, use.tool_use_id);
    expect(finals).toHaveLength(1);
    expect(finals[0]).toMatchObject({ status: 'completed', is_error: false, content: [{ type: 'text', text: OUTPUT }] });
    expect(herm.history(sessionId)).toEqual(finals);
    expect(herm.continuations(sessionId, use.tool_use_id)).toBe(1);
    expect(hermes.startCount()).toBe(1);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({
      state: 'done',
      kickoff: 'accepted',
      final_status: 'completed',
      final_event_id: finals[0]?.id,
    });
  });

  it('a 429 and a 502 on the final post are retried too', async () => {
    const { herm, bridge, ledger } = await startEnv();
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: scripts.held(100, OUTPUT) });
    await bridge.handleEvent(sessionId, use);
    herm.injectFault({ status: 429, body: JSON.stringify({ error: { type: 'rate_limit_error', message: 'slow down' } }) });
    herm.injectFault({ status: 502 });
    await bridge.idle();
    expect(postsOf(herm, sessionId, use.tool_use_id, 'final')).toHaveLength(3);
    expect(acceptedFinals(herm, sessionId, use.tool_use_id)).toHaveLength(1);
    expect(herm.continuations(sessionId, use.tool_use_id)).toBe(1);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'done', final_status: 'completed' });
  });

  it('a dropped response after Herm processed the final: retried, Herm returns the existing event, still one final', async () => {
    const { herm, bridge, ledger } = await startEnv();
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: scripts.held(100, OUTPUT) });
    await bridge.handleEvent(sessionId, use);
    herm.injectFault({ drop: 'after-processing' });
    await bridge.idle();

    const finalPosts = postsOf(herm, sessionId, use.tool_use_id, 'final');
    expect(finalPosts.map((posted) => posted.status)).toEqual(['completed', 'completed']);
    const finals = acceptedFinals(herm, sessionId, use.tool_use_id);
    expect(finals).toHaveLength(1);
    expect(herm.history(sessionId)).toEqual(finals);
    expect(herm.continuations(sessionId, use.tool_use_id)).toBe(1);
    // The retry's 202 carried the event accepted by the dropped request.
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'done', final_status: 'completed', final_event_id: finals[0]?.id });
  });

  it('a final post that never gets through is left unfinished for recover(), and never duplicated', async () => {
    const { herm, bridge, ledger } = await startEnv();
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: scripts.held(100, OUTPUT) });
    await bridge.handleEvent(sessionId, use);
    herm.injectFault({ status: 503, times: 6 });
    await bridge.idle();
    // Bounded: six attempts (finalRetry.attempts), none accepted.
    expect(postsOf(herm, sessionId, use.tool_use_id, 'final')).toHaveLength(6);
    expect(acceptedFinals(herm, sessionId, use.tool_use_id)).toHaveLength(0);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'running', kickoff: 'accepted', final_status: null });
    expect((await ledger.unfinishedJobs()).map((job) => job.tool_use_id)).toEqual([use.tool_use_id]);

    await bridge.recover();
    await bridge.idle();
    expect(postsOf(herm, sessionId, use.tool_use_id, 'final')).toHaveLength(7);
    const finals = acceptedFinals(herm, sessionId, use.tool_use_id);
    expect(finals).toHaveLength(1);
    expect(finals[0]).toMatchObject({ status: 'completed', content: [{ type: 'text', text: OUTPUT }] });
    expect(herm.continuations(sessionId, use.tool_use_id)).toBe(1);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'done', final_status: 'completed', final_event_id: finals[0]?.id });
  });
});

describe('kickoff retries', () => {
  it('a 429 on the kickoff is retried (Herm certainly did not take it)', async () => {
    const { herm, hermes, bridge, ledger } = await startEnv();
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: scripts.held(100, OUTPUT) });
    herm.injectFault({ status: 429, body: JSON.stringify({ error: { type: 'rate_limit_error', message: 'slow down' } }) });
    const job = await bridge.handleEvent(sessionId, use);
    expect(job?.kickoff).toBe('accepted');
    await bridge.idle();

    expect(postedResults(herm, sessionId).map((posted) => posted.status)).toEqual(['running', 'running', 'completed']);
    const running = acceptedRunning(herm, sessionId, use.tool_use_id);
    expect(running).toHaveLength(1);
    const finals = acceptedFinals(herm, sessionId, use.tool_use_id);
    expect(finals).toHaveLength(1);
    expect(herm.history(sessionId)).toEqual(finals);
    expect(herm.continuations(sessionId, use.tool_use_id)).toBe(1);
    expect(hermes.startCount()).toBe(1);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({
      kickoff: 'accepted',
      kickoff_event_id: running[0]?.id,
      state: 'done',
      final_status: 'completed',
    });
  });

  it('a 5xx on the kickoff is not retried (outcome unknown); the final result is still posted', async () => {
    const { herm, hermes, bridge, ledger } = await startEnv();
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: scripts.held(100, OUTPUT) });
    herm.injectFault({ status: 500 });
    const job = await bridge.handleEvent(sessionId, use);
    expect(job?.kickoff).toBe('unknown');
    await bridge.idle();

    expect(postsOf(herm, sessionId, use.tool_use_id, 'running')).toHaveLength(1);
    expect(postedResults(herm, sessionId).map((posted) => posted.status)).toEqual(['running', 'completed']);
    expect(acceptedRunning(herm, sessionId, use.tool_use_id)).toHaveLength(0);
    const finals = acceptedFinals(herm, sessionId, use.tool_use_id);
    expect(finals).toHaveLength(1);
    expect(finals[0]).toMatchObject({ status: 'completed', is_error: false, content: [{ type: 'text', text: OUTPUT }] });
    expect(herm.history(sessionId)).toEqual(finals);
    // The call was still pending in Herm (the kickoff never landed): the final answers it directly, no new turn.
    expect(herm.toolCall(sessionId, use.tool_use_id)).toMatchObject({ state: 'completed', final_event_id: finals[0]?.id });
    expect(herm.toolCall(sessionId, use.tool_use_id)?.running_event_id).toBeUndefined();
    expect(herm.continuations(sessionId, use.tool_use_id)).toBe(0);
    expect(hermes.startCount()).toBe(1);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({
      kickoff: 'unknown',
      kickoff_event_id: null,
      state: 'done',
      final_status: 'completed',
    });
  });

  it('a dropped kickoff response is not retried either', async () => {
    const { herm, bridge, ledger } = await startEnv();
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: scripts.held(100, OUTPUT) });
    herm.injectFault({ drop: 'after-processing' });
    const job = await bridge.handleEvent(sessionId, use);
    expect(job?.kickoff).toBe('unknown');
    await bridge.idle();
    expect(postsOf(herm, sessionId, use.tool_use_id, 'running')).toHaveLength(1);
    // Herm did take the dropped kickoff, so the final replaced it.
    const finals = acceptedFinals(herm, sessionId, use.tool_use_id);
    expect(finals).toHaveLength(1);
    expect(herm.history(sessionId)).toEqual(finals);
    expect(herm.continuations(sessionId, use.tool_use_id)).toBe(1);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ kickoff: 'unknown', state: 'done', final_status: 'completed' });
  });
});
