/**
 * The Herm bridge's spans and job gauge through the real OpenTelemetry SDK: each job's kickoff,
 * follow and final result (and recovery) are spans, the connector's invocations nest under
 * them, and `herm.bridge.jobs` counts the jobs a bridge drives by state, back to zero when done.
 */
import { context, metrics, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { PullReader } from '../helpers/otel.js';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approveRun, bridgeEnvFactory, callTool, newSessionId, scripts } from '../helpers/bridge-env.js';
import { eventually } from '../helpers/harness.js';

const exporter = new InMemorySpanExporter();
const reader = new PullReader();
beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
});
afterAll(() => {
  trace.disable();
  metrics.disable();
  context.disable();
});

const startEnv = bridgeEnvFactory();
const named = (name: string) => exporter.getFinishedSpans().filter((span) => span.name === name);
const childrenOf = (parent: ReadableSpan) => exporter.getFinishedSpans().filter((span) => span.parentSpanContext?.spanId === parent.spanContext().spanId);

async function jobGauge(): Promise<Record<string, number>> {
  return Object.fromEntries((await reader.points('herm.bridge.jobs')).map((point) => [String(point.attributes.state), point.value as number]));
}

describe('Herm bridge telemetry', () => {
  it('kickoff, follow and final_result spans per job, the run_events invocation under follow; the gauge back to zero', async () => {
    const env = await startEnv();
    exporter.reset();
    const sessionId = newSessionId();
    const use = callTool(env.herm, sessionId, { prompt: 'Render', sim_script: scripts.quick('Done.') });
    const job = await env.bridge.handleEvent(sessionId, use);
    await env.bridge.idle();

    const [kickoff] = named('herm.bridge kickoff');
    const [follow] = named('herm.bridge follow');
    const [final] = named('herm.bridge final_result');
    for (const span of [kickoff, follow, final]) expect(span?.attributes).toMatchObject({ 'herm.tool_use_id': use.tool_use_id, 'hermes.run_id': job?.run_id });
    expect(childrenOf(follow as ReadableSpan).map((span) => span.name)).toContain('aip.invoke run_events');
    expect(await jobGauge()).toEqual({ starting: 0, running: 0, done: 0 });
  });

  it("a peer's 100,000-character tool_use_id is cut to a bounded attribute", async () => {
    const env = await startEnv();
    exporter.reset();
    const sessionId = newSessionId();
    const toolUseId = `toolu_${'u'.repeat(100_000)}`;
    await env.bridge.handleEvent(sessionId, callTool(env.herm, sessionId, { prompt: 'Render', sim_script: scripts.quick('Done.') }, toolUseId));
    await env.bridge.idle();
    const [kickoff] = named('herm.bridge kickoff');
    const recorded = kickoff?.attributes['herm.tool_use_id'] as string;
    expect(recorded.length).toBeLessThanOrEqual(512);
    expect(toolUseId.startsWith(recorded.replace(/…$/, ''))).toBe(true);
  });

  it('recover() traces each job it resumes', async () => {
    const env = await startEnv();
    const sessionId = newSessionId();
    const use = callTool(env.herm, sessionId, { prompt: 'Render', sim_script: scripts.approval('Done.') });
    const job = await env.bridge.handleEvent(sessionId, use);
    await env.bridge.close();
    await approveRun(env, job?.run_id as string);
    await eventually(() => env.hermes.run(job?.run_id as string)?.status === 'completed' || undefined, 'the run completed without a bridge');
    exporter.reset();
    const { bridge } = env.restart(env.ledger);
    await bridge.recover();
    await bridge.idle();
    const [recovered] = named('herm.bridge recover');
    expect(recovered?.attributes).toMatchObject({ 'herm.tool_use_id': use.tool_use_id, 'hermes.run_id': job?.run_id });
    expect(childrenOf(recovered as ReadableSpan).map((span) => span.name)).toEqual(
      expect.arrayContaining(['aip.invoke run_status', 'herm.bridge final_result']),
    );
  });
});
