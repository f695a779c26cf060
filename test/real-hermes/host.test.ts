/**
 * `hermes-aip host` in front of every installed real Hermes, driven through the runtime double as a
 * reference runtime would: run_start, then run_status, then a streaming run_events whose chunks reach
 * the callback ingress, each answer passing every central check. The double reads numbers as
 * serde_json does, so Hermes' own `time.time()` timestamps (17 significant digits, about one in five
 * read one double away) must be signed as the reference reads them for any chunk or result to verify.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { RunEventsOutput } from 'aip-connector-hermes-agent';
import { runAction, runStartAction, startRuntime, closeDeployments, waitForReady } from '../helpers/aip-runtime/deployment-fixture.js';
import { expectSignedResult } from '../helpers/aip-runtime/expectations.js';
import { launchHost, type HostProcess } from '../helpers/aip-runtime/launcher.js';
import type { AipRuntime } from '../helpers/aip-runtime/runtime.js';
import { startHermesWithFakeModel } from '../helpers/real-hermes.js';
import type { FakeModel } from 'aip-connector-hermes-agent/fake-model';
import type { RealHermes } from '../helpers/real-hermes.js';
import { describeEachRelease, SCENARIO_TIMEOUT_MS, START_TIMEOUT_MS } from './support.js';

/** The non-integral numbers anywhere in a value: Hermes' event timestamps among them. */
function floatsIn(value: unknown): number[] {
  if (typeof value === 'number') return Number.isInteger(value) ? [] : [value];
  if (Array.isArray(value)) return value.flatMap(floatsIn);
  if (value !== null && typeof value === 'object') return Object.values(value).flatMap(floatsIn);
  return [];
}

describeEachRelease('hermes-aip host over real Hermes %s', { timeout: SCENARIO_TIMEOUT_MS }, (release) => {
  let hermes: RealHermes;
  let model: FakeModel;
  let runtime: AipRuntime;
  let host: HostProcess;

  beforeAll(async () => {
    ({ hermes, model } = await startHermesWithFakeModel({ version: release }));
    runtime = await startRuntime();
    host = await launchHost({ runtime, hermes: { url: hermes.baseUrl, apiKey: hermes.apiKey } });
    await waitForReady(host, 200, 60_000);
  }, START_TIMEOUT_MS);
  afterAll(async () => {
    await closeDeployments();
    await hermes?.stop();
    await model?.close();
  }, START_TIMEOUT_MS);

  test('run_start → run_status → run_events (streaming): signed answers, chunks through the callback ingress, in order', async () => {
    const started = expectSignedResult(
      await runtime.dispatcher.invoke(host.target, runStartAction({ input: 'Reply with the single word: ready' }), { timeoutMs: 30_000 }),
    );
    expect(started.status, JSON.stringify(started.error)).toBe('completed');
    const runId = (started.output as { run_id: string }).run_id;

    const status = expectSignedResult(await runtime.dispatcher.invoke(host.target, runAction('run_status', runId), { timeoutMs: 30_000 }));
    expect(status.status, JSON.stringify(status.error)).toBe('completed');
    expect((status.output as { run_id?: string; status: string }).status).toMatch(/^(queued|running|completed)$/);

    const streaming = runAction('run_events', runId, { mode: 'streaming' });
    const events = expectSignedResult(await runtime.dispatcher.invoke(host.target, streaming, { timeoutMs: 60_000 }));
    expect(events.status, JSON.stringify(events.error)).toBe('completed');
    const output = events.output as RunEventsOutput;
    expect(output.terminal_event).toBe('run.completed');
    expect(output.text).toBe('ready');

    const records = runtime.ingress.records.filter((record) => record.chunk?.action_id === streaming.id);
    expect(records.flatMap((record) => record.problems)).toEqual([]);
    expect(records.length).toBeGreaterThan(0);
    expect(records.every((record) => record.accepted)).toBe(true);
    const sequences = records.map((record) => record.chunk!.sequence);
    expect(sequences).toEqual(sequences.map((_, index) => index));
    expect(records.at(-1)!.chunk!.kind).toBe('done');
    // Hermes' float timestamps crossed the hop inside signed chunks and the signed result, and verified.
    expect(floatsIn(records.map((record) => record.chunk)).length).toBeGreaterThan(0);
    expect(floatsIn(output).length).toBeGreaterThan(0);
    expect(host.stderr()).not.toContain(hermes.apiKey);
  });
});
