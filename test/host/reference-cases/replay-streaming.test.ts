/**
 * §3 "Replay, cancel scope, malformed input and streaming".
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDeployments, runRequests, runAction, startDeployment, type Deployment } from '../../helpers/aip-runtime/deployment-fixture.js';
import { expectRouteMismatch, expectSignedError, expectSignedResult, startRunThroughHost } from '../../helpers/aip-runtime/expectations.js';

describe('§3 replay, cancel scope, malformed input and streaming', () => {
  let deployment: Deployment;
  let runId: string;

  beforeAll(async () => {
    deployment = await startDeployment();
    const script = [
      { type: 'delta', text: 'one ' },
      { type: 'delta', text: 'two ' },
      { type: 'tool', tool: 'terminal', preview: 'ls' },
      { type: 'delta', text: 'three' },
      { type: 'complete', output: 'one two three' },
    ];
    runId = await startRunThroughHost(deployment, { input: 'stream', sim_script: script });
  });
  afterAll(closeDeployments);

  it('reject.replayed_message_id: the same signed envelope twice → 200, then 409 connector_host.replay', async () => {
    const { dispatcher } = deployment.runtime;
    const prepared = dispatcher.prepareAction(deployment.host.target, runAction('run_status', runId));
    const first = await dispatcher.send(prepared);
    expectSignedResult({ prepared, exchange: first, verdict: dispatcher.verify(prepared, first) });
    const statusReads = runRequests(deployment.simulator);
    const second = await dispatcher.send(prepared);
    expectSignedError({ prepared, exchange: second, verdict: dispatcher.verify(prepared, second) }, 409, 'connector_host.replay', 'policy', false);
    expect(runRequests(deployment.simulator)).toBe(statusReads);
  });

  it('reject.stale_sent_at: sent_at 10 minutes old → 409 connector_host.replay', async () => {
    const outcome = await deployment.runtime.dispatcher.invoke(deployment.host.target, runAction('run_status', runId), { sentAt: Date.now() - 10 * 60_000 });
    expectSignedError(outcome, 409, 'connector_host.replay', 'policy', false);
  });

  it('reject.session_cancel: a cancel whose target is a session → 403', async () => {
    const { dispatcher } = deployment.runtime;
    const action = runAction('run_status', runId);
    expectSignedResult(await dispatcher.invoke(deployment.host.target, action));
    expectRouteMismatch(await dispatcher.cancel(deployment.host.target, action.id, { cancelTarget: { session: 'sess_runtime_1' } }), 403);
  });

  it('reject.not_an_envelope: {"hello":"world"} → 400 with an unsigned permanent error', async () => {
    const response = await fetch(deployment.host.target.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"hello":"world"}' });
    expect(response.status).toBe(400);
    const body = (await response.json()) as any;
    expect(Object.keys(body)).toEqual(['error']);
    expect(['schema.envelope.invalid', 'envelope.decode.invalid']).toContain(body.error.code);
    expect(body.error).toMatchObject({ category: 'permanent', retryable: false });
    expect(typeof body.error.message).toBe('string');
  });

  describe('a streaming run_events action', () => {
    let actionId: string;
    let resultStatus: string;

    beforeAll(async () => {
      const action = runAction('run_events', runId, { mode: 'streaming' });
      actionId = action.id;
      resultStatus = expectSignedResult(await deployment.runtime.dispatcher.invoke(deployment.host.target, action)).status;
    });

    it('stream.result: the final action_result comes back on the same POST', () => {
      expect(resultStatus).toBe('completed');
    });

    it('stream.callbacks_valid: chunks reached the ingress, each passed the central checks, sequences strictly increase', () => {
      const records = deployment.runtime.ingress.records.filter((record) => record.chunk?.action_id === actionId);
      expect(records.length).toBeGreaterThan(0);
      expect(records.flatMap((record) => record.problems)).toEqual([]);
      expect(records.every((record) => record.accepted)).toBe(true);
      const sequences = records.map((record) => record.chunk!.sequence);
      expect(sequences).toEqual([...sequences].sort((a, b) => a - b));
      expect(new Set(sequences).size).toBe(sequences.length);
      expect(records.at(-1)!.chunk!.kind).toBe('done');
    });
  });
});
