/**
 * Cancels: `connector.cancel` for the routed action. A started run is stopped (the connector finds
 * it in its ledger by action id), an action executing here is aborted, a run_start still at Hermes
 * is let finish and its run then stopped, nothing to stop still answers an action_result with that
 * action id, and the host's stop signal (drain timeout) aborts what is in flight.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunStep } from 'aip-connector-hermes-agent/simulator';
import { CANCEL_WAITS_FOR_START, NOTHING_TO_STOP } from '../../src/host/execute.js';
import { startHermesGate } from '../helpers/aip-runtime/hermes-gate.js';
import { captureLogger } from '../helpers/capture-logger.js';
import {
  actionEnvelope,
  actionId,
  cancelEnvelope,
  cap,
  type HostUnderTest,
  peerResponseProblem,
  resultOf,
  routeFor,
  sentEnvelope,
  signed,
  startHost,
} from './messages-support.js';

const waits = (): RunStep[] => [{ type: 'approval', command: 'deploy' }, { type: 'complete' }];

let host: HostUnderTest;
beforeAll(async () => {
  host = await startHost({ script: waits });
});

async function started(): Promise<{ id: string; runId: string }> {
  const id = actionId();
  const answer = await host.post(
    signed(actionEnvelope(host, { id, capability_id: cap('run_start'), input: { body: { input: 'deploy' } }, idempotency_key: `k-${id}` })),
  );
  return { id, runId: String((resultOf(answer).output as Record<string, unknown>).run_id) };
}

const stopsOf = (runId: string) => host.sim.requests.filter((request) => request.method === 'POST' && request.path === `/v1/runs/${runId}/stop`);

describe('cancel of a run_start whose POST /v1/runs Hermes has not answered yet', () => {
  const closing: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const close of closing.splice(0)) await close();
  });

  it('waits for the answer, then stops the run it names: the cancel answers the stop, the start its run and that it was stopped', async () => {
    const gate = await startHermesGate(host.sim.url);
    closing.push(gate.close);
    const log = captureLogger();
    const gated = await startHost({ sim: host.sim, hermesUrl: gate.url, logger: log.logger });
    gate.holdStarts = true;
    const held = gate.nextHeld();
    const id = actionId();
    const input = `deploy ${id}`;
    const starting = gated.post(signed(actionEnvelope(gated, { id, capability_id: cap('run_start'), input: { body: { input } }, idempotency_key: `k-${id}` })));
    await held;
    // Hermes has started the run; only its answer, which names it, is still on the way.
    const runId = host.sim.runs().find((run) => run.body.input === input)?.run_id as string;
    expect(runId).toBeDefined();

    const cancelling = gated.post(signed(cancelEnvelope({ action: id }, routeFor(gated, id, cap('run_start')))));
    const first = await Promise.race([cancelling.then(() => 'the cancel answered'), log.logged(CANCEL_WAITS_FOR_START).then(() => 'the cancel waits')]);
    expect(first).toBe('the cancel waits');
    gate.release();
    const [start, cancel] = await Promise.all([starting, cancelling]);

    expect(cancel.status).toBe(200);
    expect(resultOf(cancel)).toMatchObject({ action_id: id, status: 'completed', output: { run_id: runId, status: 'stopping' } });
    expect(start.status).toBe(200);
    expect(resultOf(start)).toMatchObject({ action_id: id, status: 'completed', output: { run_id: runId } });
    const notes = (resultOf(start).message as Array<{ text: string }>).map((part) => part.text);
    expect(notes.at(-1)).toBe(`cancelled while Hermes was starting this run: run ${runId} was stopped once Hermes answered (stopping)`);
    expect(stopsOf(runId)).toHaveLength(1);
    await expect.poll(() => host.sim.run(runId)?.status, { timeout: 5_000 }).toBe('cancelled');
  });
});

describe('cancel', () => {
  it('of a run_start whose run is live: the run is stopped, and a signed action_result with that action id answers', async () => {
    const { id, runId } = await started();
    await expect.poll(() => host.sim.run(runId)?.status).toBe('waiting_for_approval');
    const text = signed(cancelEnvelope({ action: id }, routeFor(host, id, cap('run_start'))));
    const answer = await host.post(text);
    expect(answer.status).toBe(200);
    expect(peerResponseProblem(answer, sentEnvelope(text))).toBeUndefined();
    expect(resultOf(answer)).toMatchObject({ action_id: id, status: 'completed' });
    expect(stopsOf(runId)).toHaveLength(1);
  });

  it('of an action with nothing to stop (never ran here): 200 completed action_result saying so', async () => {
    const id = actionId();
    const answer = await host.post(signed(cancelEnvelope({ action: id }, routeFor(host, id, cap('run_status')))));
    expect(answer.status).toBe(200);
    expect(resultOf(answer)).toEqual({ action_id: id, status: 'completed', message: [{ type: 'text', text: NOTHING_TO_STOP }] });
  });

  it('of an action executing here: its read is aborted (it answers cancelled) and its run is stopped', async () => {
    const { runId } = await started();
    const events = { id: actionId(), capability_id: cap('run_events'), input: { run_id: runId } };
    const reading = host.post(signed(actionEnvelope(host, events)));
    await expect.poll(() => host.status.inFlight).toBe(1);
    const cancel = await host.post(signed(cancelEnvelope({ action: events.id }, routeFor(host, events.id, events.capability_id))));
    expect(cancel.status).toBe(200);
    expect(resultOf(cancel)).toMatchObject({ action_id: events.id });
    const read = await reading;
    expect(read.status).toBe(200);
    expect(resultOf(read)).toMatchObject({ action_id: events.id, status: 'cancelled', error: { code: 'connector.hermes_agent.cancelled' } });
    expect(stopsOf(runId).length).toBeGreaterThanOrEqual(1);
    expect(host.status.inFlight).toBe(0);
  });
});

/**
 * The signals Node keeps linked to `signal` for AbortSignal.any (an internal set; none on a Node that
 * keeps them otherwise, where the leak this guards against would need another probe).
 */
function dependantsOf(signal: AbortSignal): number {
  const key = Object.getOwnPropertySymbols(signal).find((symbol) => symbol.description === 'kDependantSignals');
  return key === undefined ? 0 : ((signal as unknown as Record<symbol, Set<unknown> | undefined>)[key]?.size ?? 0);
}

describe('the host’s stop signal', () => {
  it('is not linked to each action: a long-running host keeps nothing per action on it', async () => {
    const stopping = await startHost({ sim: host.sim });
    const { runId } = await started();
    for (let nth = 0; nth < 20; nth++) {
      const status = { id: actionId(), capability_id: cap('run_status'), input: { run_id: runId } };
      expect(resultOf(await stopping.post(signed(actionEnvelope(stopping, status))))).toMatchObject({ status: 'completed' });
    }
    expect(dependantsOf(stopping.stop.signal)).toBe(0);
  });

  it('aborts the actions in flight: a read waiting on a run answers cancelled at once', async () => {
    const stopping = await startHost({ sim: host.sim });
    const { runId } = await started();
    const events = { id: actionId(), capability_id: cap('run_events'), input: { run_id: runId } };
    const reading = stopping.post(signed(actionEnvelope(stopping, events)));
    await expect.poll(() => stopping.status.inFlight).toBe(1);
    stopping.stop.abort();
    const answer = await reading;
    expect(answer.status).toBe(200);
    expect(resultOf(answer)).toMatchObject({ action_id: events.id, status: 'cancelled', error: { code: 'connector.hermes_agent.cancelled' } });
  });
});
