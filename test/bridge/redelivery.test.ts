/**
 * A redelivered `agent.custom_tool_use` never starts a second run: whether it arrives after the
 * first was handled, at the same time, or after the job finished, Hermes sees one start and
 * Herm one running and one final result.
 */
import { describe, expect, it } from 'vitest';
import { LEDGER_BACKENDS } from '../helpers/ledgers.js';
import { acceptedFinals, acceptedRunning, bridgeEnvFactory, callTool, hermesStarts, newSessionId, postsOf, scripts } from '../helpers/bridge-env.js';
import type { BridgeEnv } from '../helpers/bridge-env.js';
import { ENDPOINT } from '../helpers/harness.js';
import { providerKeyOf } from '../helpers/provider-key.js';

const startEnv = bridgeEnvFactory();

function expectOneOfEach(env: BridgeEnv, sessionId: string, toolUseId: string) {
  expect(env.hermes.startCount()).toBe(1);
  expect(hermesStarts(env.hermes)).toHaveLength(1);
  expect(postsOf(env.herm, sessionId, toolUseId, 'running')).toHaveLength(1);
  expect(postsOf(env.herm, sessionId, toolUseId, 'final')).toHaveLength(1);
  expect(acceptedRunning(env.herm, sessionId, toolUseId)).toHaveLength(1);
  const finals = acceptedFinals(env.herm, sessionId, toolUseId);
  expect(finals).toHaveLength(1);
  expect(finals[0]).toMatchObject({ status: 'completed', is_error: false });
  expect(env.herm.history(sessionId)).toHaveLength(1);
  expect(env.herm.continuations(sessionId, toolUseId)).toBe(1);
}

describe.each(LEDGER_BACKENDS)('a redelivered tool-use event ($name ledger)', (backend) => {
  it('delivered twice in a row: one run, one running, one final', async () => {
    const env = await startEnv({ ledger: (await backend.create()).ledger });
    const sessionId = newSessionId();
    const use = callTool(env.herm, sessionId, { prompt: 'Render', sim_script: scripts.held(150) });
    const first = await env.bridge.handleEvent(sessionId, use);
    const again = env.herm.emitToolUse(sessionId, { name: use.name, input: use.input, tool_use_id: use.tool_use_id });
    expect(again).toEqual(use);
    const second = await env.bridge.handleEvent(sessionId, again);
    expect(second?.run_id).toBe(first?.run_id);
    await env.bridge.idle();
    expectOneOfEach(env, sessionId, use.tool_use_id);
    expect(await env.ledger.job(sessionId, use.tool_use_id)).toMatchObject({
      run_id: first?.run_id,
      state: 'done',
      kickoff: 'accepted',
      final_status: 'completed',
    });
  });

  it('delivered concurrently: one run, one running, one final', async () => {
    const env = await startEnv({ ledger: (await backend.create()).ledger });
    const sessionId = newSessionId();
    const use = callTool(env.herm, sessionId, { prompt: 'Render', sim_script: scripts.held(150) });
    const jobs = await Promise.all([1, 2, 3, 4].map(() => env.bridge.handleEvent(sessionId, structuredClone(use))));
    for (const job of jobs) expect(job).toMatchObject({ session_id: sessionId, tool_use_id: use.tool_use_id });
    await env.bridge.idle();
    expectOneOfEach(env, sessionId, use.tool_use_id);
    const record = await env.ledger.job(sessionId, use.tool_use_id);
    expect(record).toMatchObject({ state: 'done', kickoff: 'accepted', final_status: 'completed' });
    expect(hermesStarts(env.hermes)[0]?.headers['idempotency-key']).toBe(
      providerKeyOf(`cap:hermes_agent:${ENDPOINT}:run_start`, record?.idempotency_key ?? ''),
    );
  });

  it('delivered again after the job finished: nothing more is started or posted', async () => {
    const env = await startEnv({ ledger: (await backend.create()).ledger });
    const sessionId = newSessionId();
    const use = callTool(env.herm, sessionId, { prompt: 'Render', sim_script: scripts.quick() });
    await env.bridge.handleEvent(sessionId, use);
    await env.bridge.idle();
    const requestsBefore = env.herm.requests.length;
    const late = await env.bridge.handleEvent(sessionId, env.herm.emitToolUse(sessionId, { name: use.name, input: use.input, tool_use_id: use.tool_use_id }));
    expect(late).toMatchObject({ state: 'done', final_status: 'completed' });
    await env.bridge.idle();
    expect(env.herm.requests).toHaveLength(requestsBefore);
    expectOneOfEach(env, sessionId, use.tool_use_id);
  });

  it('the same tool_use_id in another session is another call', async () => {
    const env = await startEnv({ ledger: (await backend.create()).ledger });
    const [a, b] = [newSessionId(), newSessionId()];
    const useA = callTool(env.herm, a, { prompt: 'Render A', sim_script: scripts.quick('A done') }, 'custom_toolu_shared');
    const useB = callTool(env.herm, b, { prompt: 'Render B', sim_script: scripts.quick('B done') }, 'custom_toolu_shared');
    const [jobA, jobB] = await Promise.all([env.bridge.handleEvent(a, useA), env.bridge.handleEvent(b, useB)]);
    expect(jobA?.run_id).not.toBe(jobB?.run_id);
    await env.bridge.idle();
    expect(env.hermes.startCount()).toBe(2);
    expect(acceptedFinals(env.herm, a, 'custom_toolu_shared').map((event) => event.content)).toEqual([[{ type: 'text', text: 'A done' }]]);
    expect(acceptedFinals(env.herm, b, 'custom_toolu_shared').map((event) => event.content)).toEqual([[{ type: 'text', text: 'B done' }]]);
  });
});
