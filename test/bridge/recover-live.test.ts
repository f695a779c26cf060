/**
 * recover() in a process that is already handling events (an application that subscribes and
 * recovers at startup, or calls recover() again later): jobs this process is still starting
 * or following are its own, not leftovers, and must not be finished a second time or differently.
 * The same holds for another bridge (another replica) on the same ledger: the job lease keeps
 * its recover() away from jobs a live bridge is driving.
 */
import { describe, expect, it } from 'vitest';
import { createMemoryLedger, type RunLedger } from 'aip-connector-hermes-agent';
import { eventually } from '../helpers/harness.js';
import { acceptedFinals, bridgeEnvFactory, callTool, hermesRunRequests, newSessionId, postedResults, scripts, textOf } from '../helpers/bridge-env.js';

const startEnv = bridgeEnvFactory();

/** A ledger whose `settle` (the connector storing a started run's outcome and binding) waits until released. */
function gatedLedger(inner: RunLedger) {
  let release!: () => void;
  const opened = new Promise<void>((resolve) => (release = resolve));
  let reached = false;
  const ledger = new Proxy(inner, {
    get(target, property) {
      if (property === 'settle') {
        return async (...args: Parameters<RunLedger['settle']>) => {
          reached = true;
          await opened;
          return target.settle(...args);
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

  it("another bridge's recover() leaves a job this bridge is still starting alone, though its lease is short", async () => {
    const memory = createMemoryLedger();
    const gate = gatedLedger(memory);
    const { herm, hermes, bridge, ledger, restart } = await startEnv({ ledger: gate.ledger, bridge: { bridgeId: 'bridge-a', jobLeaseMs: 150 } });
    try {
      const sessionId = newSessionId();
      const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: scripts.held(100, 'Rendered once.') });
      const handled = bridge.handleEvent(sessionId, use);
      await eventually(() => gate.reached(), 'the run started');
      const other = restart(gate.ledger, { bridgeId: 'bridge-b', jobLeaseMs: 150 }).bridge;
      await other.recover();
      // Several lease periods pass while the start is held: bridge-a keeps renewing, bridge-b keeps waiting.
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(await memory.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'starting', lease_owner: 'bridge-a' });
      gate.release();
      await handled;
      await bridge.idle();
      await other.idle();

      expect(hermes.startCount()).toBe(1);
      const finals = acceptedFinals(herm, sessionId, use.tool_use_id);
      expect(finals).toHaveLength(1);
      expect(finals[0]).toMatchObject({ status: 'completed', is_error: false });
      expect(postedResults(herm, sessionId).map((posted) => posted.status)).toEqual(['running', 'completed']);
      expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'done', lease_owner: 'bridge-a' });
    } finally {
      gate.release();
      await memory.close();
    }
  });

  it("another bridge's recover() never follows a run this bridge is following", async () => {
    const { herm, hermes, bridge, ledger, restart } = await startEnv({ bridge: { bridgeId: 'bridge-a', jobLeaseMs: 150 } });
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: scripts.held(800, 'Rendered once.') });
    const job = await bridge.handleEvent(sessionId, use);
    const other = restart(ledger, { bridgeId: 'bridge-b', jobLeaseMs: 150 }).bridge;
    await other.recover();
    await bridge.idle();
    await other.idle();
    const runId = job?.run_id as string;
    // bridge-b would have read the run's status first; only bridge-a's one stream ever touched it.
    expect(hermesRunRequests(hermes, runId, '')).toHaveLength(0);
    expect(hermesRunRequests(hermes, runId, '/events')).toHaveLength(1);
    expect(acceptedFinals(herm, sessionId, use.tool_use_id)).toHaveLength(1);
    expect(postedResults(herm, sessionId).map((posted) => posted.status)).toEqual(['running', 'completed']);
  });
});
