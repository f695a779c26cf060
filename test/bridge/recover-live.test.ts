/**
 * recover() in a process that is already handling events (an application that subscribes and
 * recovers at startup, or calls recover() again later): jobs this process is still starting
 * or following are its own, not leftovers, and must not be finished a second time or differently.
 */
import { describe, expect, it } from 'vitest';
import { createMemoryLedger, type RunLedger } from 'aip-connector-hermes-agent';
import { eventually } from '../helpers/harness.js';
import { acceptedFinals, bridgeEnvFactory, callTool, hermesRunRequests, newSessionId, postedResults, scripts, textOf } from '../helpers/bridge-env.js';

const startEnv = bridgeEnvFactory();

/** A ledger whose `recordRun` (the connector keeping a started run's binding) waits until released. */
function gatedLedger(inner: RunLedger) {
  let release!: () => void;
  const opened = new Promise<void>((resolve) => (release = resolve));
  let reached = false;
  const ledger = new Proxy(inner, {
    get(target, property) {
      if (property === 'recordRun') {
        return async (...args: Parameters<RunLedger['recordRun']>) => {
          reached = true;
          await opened;
          return target.recordRun(...args);
        };
      }
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { ledger, release, reached: () => reached };
}

describe('recover() while the bridge is live', () => {
  it('a job still being started by this process is left to it: one final result, completed, matching the ledger', async () => {
    const memory = createMemoryLedger();
    const gate = gatedLedger(memory);
    const { herm, hermes, bridge, ledger } = await startEnv({ ledger: gate.ledger });
    try {
      const sessionId = newSessionId();
      const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: scripts.held(100, 'Rendered once.') });
      const handled = bridge.handleEvent(sessionId, use);
      // Hermes accepted the start; the connector is recording it: the job is `starting`, without a run id yet.
      await eventually(() => gate.reached(), 'the run started');
      expect(await memory.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'starting', run_id: null });
      await bridge.recover();
      gate.release();
      await handled;
      await bridge.idle();

      expect(hermes.startCount()).toBe(1);
      const finals = acceptedFinals(herm, sessionId, use.tool_use_id);
      expect(finals).toHaveLength(1);
      expect(finals[0]).toMatchObject({ status: 'completed', is_error: false });
      expect(textOf(finals[0] as Record<string, unknown>)).toBe('Rendered once.');
      expect(postedResults(herm, sessionId).map((posted) => posted.status)).toEqual(['running', 'completed']);
      expect(herm.continuations(sessionId, use.tool_use_id)).toBe(1);
      const record = await ledger.job(sessionId, use.tool_use_id);
      expect(record).toMatchObject({ state: 'done', kickoff: 'accepted', final_status: finals[0]?.status, final_event_id: finals[0]?.id });
    } finally {
      gate.release();
      await memory.close();
    }
  });

  it('a job this process is following is not followed twice', async () => {
    const { herm, hermes, bridge } = await startEnv();
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: scripts.held(300, 'Rendered once.') });
    const job = await bridge.handleEvent(sessionId, use);
    await bridge.recover();
    await bridge.recover();
    await bridge.idle();
    expect(hermesRunRequests(hermes, job?.run_id as string, '/events')).toHaveLength(1);
    expect(postedResults(herm, sessionId).map((posted) => posted.status)).toEqual(['running', 'completed']);
    expect(acceptedFinals(herm, sessionId, use.tool_use_id)).toHaveLength(1);
  });
});
