/**
 * An approval nobody answers: Hermes denies it after its approval timeout (3 s here; 0.18.2 reads
 * `approvals.gateway_timeout`, 0.19.0 `approvals.timeout`), with no `approval.responded` event, and
 * the run still completes.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { RunEventsOutput } from 'aip-connector-hermes-agent';
import { describeEachRelease, SCENARIO_TIMEOUT_MS, START_TIMEOUT_MS, startRealEndpoint, type RealEndpoint } from './support.js';

describeEachRelease('real Hermes %s with a 3 s approval timeout', { timeout: SCENARIO_TIMEOUT_MS }, (version) => {
  let endpoint: RealEndpoint;
  beforeAll(async () => {
    endpoint = await startRealEndpoint({ version, approvalTimeoutSeconds: 3 });
  }, START_TIMEOUT_MS);
  afterAll(async () => {
    await endpoint?.close();
  }, START_TIMEOUT_MS);

  test('an unanswered approval is denied by the timeout: the tool fails, the folder stays, the run completes', async () => {
    const { h } = endpoint;
    const folder = endpoint.scratchFolder('unanswered');
    const runId = await h.startRun({ input: 'Run the shell command: rm -rf ./unanswered' });
    const events = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } });

    expect(events.status, JSON.stringify(events.error)).toBe('completed');
    const output = events.output as RunEventsOutput;
    const names = output.events.map((event) => event.event).filter((name) => name !== 'message.delta');
    expect(names).toEqual(['tool.started', 'approval.request', 'tool.completed', 'reasoning.available', 'run.completed']);
    expect(output.events.find((event) => event.event === 'tool.completed')?.data).toMatchObject({ error: true });
    expect(existsSync(folder)).toBe(true);
  });
});
