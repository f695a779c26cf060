/**
 * With no SDK registered the connector traces nothing (and sends no traceparent); a global SDK
 * registered after the connector was created is used from then on, as the API's late binding
 * promises.
 */
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, describe, expect, it } from 'vitest';
import { harnessFactory } from '../helpers/harness.js';

const harness = harnessFactory();
afterAll(() => {
  trace.disable();
  propagation.disable();
  context.disable();
});

describe('the global OpenTelemetry API', () => {
  it('untraced until an SDK registers, traced right after', async () => {
    const h = await harness();
    const status = () => h.invoke({ capability_id: h.cap('run_status'), input: { run_id: 'run_unknown' } });
    await status();
    expect(h.sim.requests[0]?.headers).not.toHaveProperty('traceparent');

    const exporter = new InMemorySpanExporter();
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
    await status();
    expect(exporter.getFinishedSpans().map((span) => span.name)).toEqual(expect.arrayContaining(['aip.invoke run_status', 'GET /v1/runs/{run_id}']));
    expect(h.sim.requests[1]?.headers.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
  });
});
