/**
 * Following the run to its end. A run whose event stream is cut mid-run is followed by
 * run_status polling until it ends; a failed or cancelled run becomes a `failed` result with
 * `is_error: true` and enough context (run id, terminal event, error text) for the model.
 */
import { describe, expect, it } from 'vitest';
import type { RunStep } from 'aip-connector-hermes-agent/simulator';
import { grantFor, nextId } from '../helpers/harness.js';
import { acceptedFinals, bridgeEnvFactory, callTool, hermesRunRequests, newSessionId, oneFailedFinal, postedResults, textOf } from '../helpers/bridge-env.js';
import type { HermApprovalRequest } from 'aip-connector-hermes-agent';

const startEnv = bridgeEnvFactory();

describe('a stream cut mid-run', () => {
  it('falls back to run_status polling and posts completed with the output once the run completes', async () => {
    const approvals: HermApprovalRequest[] = [];
    // The approval holds the run until the bridge is reading its stream (it answers from the
    // stream), so the cut certainly lands on the bridge's subscription.
    const { herm, hermes, bridge, ledger } = await startEnv({
      bridge: {
        onApproval: (request) => {
          approvals.push(request);
          return { choice: 'once', grant: grantFor({ run_id: request.runId, choice: 'once' }) };
        },
      },
    });
    const sessionId = newSessionId();
    const steps: RunStep[] = [
      { type: 'delta', text: 'Rendering ' },
      { type: 'approval', command: 'ffmpeg -i in.mov out.mp4', description: 'encode' },
      { type: 'cut' },
      { type: 'delta', text: 'frames' },
      { type: 'sleep', ms: 150 },
      { type: 'complete', output: 'Rendered 42 frames.' },
    ];
    const use = callTool(herm, sessionId, { prompt: 'Render', sim_script: steps });
    const job = await bridge.handleEvent(sessionId, use);
    const runId = job?.run_id as string;
    await bridge.idle();

    expect(approvals).toHaveLength(1);
    // One event stream, cut; then status reads (the connector's reconciliation and the bridge's polls) until the end.
    expect(hermesRunRequests(hermes, runId, '/events')).toHaveLength(1);
    expect(hermesRunRequests(hermes, runId, '').length).toBeGreaterThanOrEqual(2);
    expect(hermes.run(runId)?.status).toBe('completed');

    expect(postedResults(herm, sessionId).map((posted) => posted.status)).toEqual(['running', 'completed']);
    const finals = acceptedFinals(herm, sessionId, use.tool_use_id);
    expect(finals).toHaveLength(1);
    expect(finals[0]).toMatchObject({ status: 'completed', is_error: false, content: [{ type: 'text', text: 'Rendered 42 frames.' }] });
    expect(herm.history(sessionId)).toEqual(finals);
    expect(herm.continuations(sessionId, use.tool_use_id)).toBe(1);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'done', final_status: 'completed', final_event_id: finals[0]?.id });
  });
});

describe('a run that does not complete', () => {
  it('a failed run: final failed, is_error true, naming the run, run.failed and the error text', async () => {
    const { herm, bridge, ledger } = await startEnv();
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, {
      prompt: 'Render',
      sim_script: [
        { type: 'delta', text: 'Rendering' },
        { type: 'sleep', ms: 50 },
        { type: 'fail', error: 'encoder crashed: out of disk space' },
      ],
    });
    const job = await bridge.handleEvent(sessionId, use);
    const runId = job?.run_id as string;
    await bridge.idle();

    expect(postedResults(herm, sessionId).map((posted) => [posted.status, posted.is_error])).toEqual([
      ['running', false],
      ['failed', true],
    ]);
    const finals = acceptedFinals(herm, sessionId, use.tool_use_id);
    expect(finals).toHaveLength(1);
    expect(finals[0]).toMatchObject({ tool_use_id: use.tool_use_id, status: 'failed', is_error: true });
    const text = textOf(finals[0] as Record<string, unknown>);
    expect(text).toContain(runId);
    expect(text).toContain('run.failed');
    expect(text).toContain('encoder crashed: out of disk space');
    expect(herm.history(sessionId)).toEqual(finals);
    expect(herm.continuations(sessionId, use.tool_use_id)).toBe(1);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'done', final_status: 'failed', final_event_id: finals[0]?.id });
  });

  it.each(['pin', 'later'] as const)('a run stopped in Hermes (%s): final failed, mentioning cancelled', async (profile) => {
    const { herm, hermes, bridge, ledger, connector, cap } = await startEnv({ hermes: { profile } });
    const sessionId = newSessionId();
    const use = callTool(herm, sessionId, {
      prompt: 'Render',
      sim_script: [
        { type: 'delta', text: 'Rendering' },
        { type: 'sleep', ms: 60_000 },
        { type: 'complete', output: 'never' },
      ],
    });
    const job = await bridge.handleEvent(sessionId, use);
    const runId = job?.run_id as string;

    const stop = await connector.invoke(
      { id: nextId(), capability_id: cap('run_stop'), input: { run_id: runId }, idempotency_key: nextId('stop') },
      { approval: grantFor({ run_id: runId }) },
    );
    expect(stop.status, JSON.stringify(stop.error)).toBe('completed');
    await bridge.idle();

    expect(hermesRunRequests(hermes, runId, '/stop')).toHaveLength(1);
    expect(hermes.run(runId)?.status).toBe('cancelled');
    expect(postedResults(herm, sessionId).map((posted) => posted.status)).toEqual(['running', 'failed']);
    const text = oneFailedFinal(herm, sessionId, use.tool_use_id);
    expect(text).toContain(runId);
    expect(text).toContain('cancelled');
    expect(text).not.toContain('never');
    expect(herm.continuations(sessionId, use.tool_use_id)).toBe(1);
    expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'done', final_status: 'failed' });
  });
});
