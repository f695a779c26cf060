/**
 * A run's lifecycle traced with the OpenTelemetry SDK: the connector depends on
 * `@opentelemetry/api` only, so the host registers the SDK it wants (here, spans printed to the
 * console as they end) before creating the connector.
 * Run: npm run build && npx tsx examples/otel.ts
 */
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, SimpleSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { createHermesConnector } from 'aip-connector-hermes-agent';
import { startHermesSimulator } from 'aip-connector-hermes-agent/simulator';

/** One line per span: its name, its parent's name and the attributes the connector sets. */
const printer: SpanExporter = {
  export(spans: ReadableSpan[], done) {
    for (const span of spans) console.log(`${span.name}  ${JSON.stringify(span.attributes)}`);
    done({ code: 0 });
  },
  shutdown: async () => undefined,
};
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
propagation.setGlobalPropagator(new W3CTraceContextPropagator());
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(printer)] }));

const hermes = await startHermesSimulator({ apiKey: 'hk_local_key' });
const connector = createHermesConnector({ endpoints: [{ id: 'local', baseUrl: hermes.url, apiKey: 'hk_local_key' }] });
const cap = (operation: string) => `cap:hermes_agent:local:${operation}`;

const started = await connector.invoke(
  { id: 'act_otel_1', capability_id: cap('run_start'), input: { body: { input: 'Say hello.' } }, idempotency_key: 'otel-example-1' },
  { tenantId: 'tenant-a', traceId: 'trace-otel-example' },
);
const { run_id } = started.output as { run_id: string };
await connector.invoke({ id: 'act_otel_2', capability_id: cap('run_events'), input: { run_id } }, { tenantId: 'tenant-a' });
await connector.invoke({ id: 'act_otel_3', capability_id: cap('run_status'), input: { run_id } }, { tenantId: 'tenant-a' });

await connector.close();
await hermes.close();
