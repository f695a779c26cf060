/**
 * The Hermes start itself fails. With a known outcome (Hermes refused it) the bridge answers
 * the pending call with a `failed` result straight away, no `running` kickoff; with an unknown
 * outcome (5xx) it says so, and never starts the run again, not even on a redelivery.
 */
import { describe, expect, it } from 'vitest';
import {
  acceptedFinals,
  bridgeEnvFactory,
  callTool,
  hermesStarts,
  newSessionId,
  oneFailedFinal,
  postedResults,
  scripts,
  textOf,
} from '../helpers/bridge-env.js';

const startEnv = bridgeEnvFactory();

describe('a Hermes start that fails', () => {
  it('refused (400): one failed result at once, is_error, naming the error; no running kickoff', async () => {
    const { herm, hermes, bridge, ledger } = await startEnv();
    hermes.injectFault({
      route: 'start',
      response: { status: 400, body: JSON.stringify({ error: { message: 'model not available', type: 'invalid_request_error', code: 'model_not_found' } }) },
    });
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: scripts.quick() });
    const job = await bridge.handleEvent(sessionId, use);
    expect(job).toMatchObject({ run_id: null, kickoff: 'skipped' });
    await bridge.idle();

    expect(hermesStarts(hermes)).toHaveLength(1);
    expect(hermes.startCount()).toBe(0);
    expect(postedResults(herm, sessionId).map((posted) => posted.status)).toEqual(['failed']);
    const finals = acceptedFinals(herm, sessionId, use.tool_use_id);
    expect(finals).toHaveLength(1);
    expect(finals[0]).toMatchObject({ tool_use_id: use.tool_use_id, status: 'failed', is_error: true });
    expect(textOf(finals[0] as Record<string, unknown>)).toContain('connector.hermes_agent.remote_rejected');
    // No running result: the failed result answers the pending call directly.
    expect(herm.toolCall(sessionId, use.tool_use_id)).toMatchObject({ state: 'failed', final_event_id: finals[0]?.id });
    expect(herm.continuations(sessionId, use.tool_use_id)).toBe(0);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({
      run_id: null,
      kickoff: 'skipped',
      state: 'done',
      final_status: 'failed',
      final_event_id: finals[0]?.id,
    });
  });

  it('outcome unknown (503): failed, saying so; never started again, not even on a redelivery', async () => {
    const { herm, hermes, bridge, ledger } = await startEnv();
    hermes.injectFault({ route: 'start', response: { status: 503 } });
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: scripts.quick() });
    await bridge.handleEvent(sessionId, use);
    await bridge.idle();
    await bridge.handleEvent(sessionId, herm.emitToolUse(sessionId, { name: use.name, input: use.input, tool_use_id: use.tool_use_id }));
    await bridge.idle();

    expect(hermesStarts(hermes)).toHaveLength(1);
    const text = oneFailedFinal(herm, sessionId, use.tool_use_id);
    expect(text).toContain('unknown');
    expect(text).toContain('connector.hermes_agent.remote_temporary');
    expect(postedResults(herm, sessionId).map((posted) => posted.status)).toEqual(['failed']);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ kickoff: 'skipped', state: 'done', final_status: 'failed' });
  });
});
