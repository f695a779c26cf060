import type { SpanExporter, ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { UsageError } from './errors.js';

const OPTIONAL_PACKAGES =
  '@opentelemetry/sdk-trace-base@2.12.1 @opentelemetry/core@2.12.1 @opentelemetry/resources@2.12.1 @opentelemetry/context-async-hooks@2.12.1';

/**
 * Tracing for the CLI from the standard OpenTelemetry variables: `OTEL_TRACES_EXPORTER`
 * (`otlp`, `console` or `none`, the default), `OTEL_SERVICE_NAME` (default `hermes-aip`),
 * `OTEL_SDK_DISABLED`, and the OTLP exporter's own `OTEL_EXPORTER_OTLP_*`. The SDK is an optional
 * dependency, loaded only when asked. It is registered globally, so every connector the
 * command creates traces through it and sends W3C trace context to Hermes. Resolves with the
 * flush to await before exiting, or undefined when tracing is off.
 */
export async function startTracingFromEnv(env: NodeJS.ProcessEnv): Promise<(() => Promise<void>) | undefined> {
  const exporterName = (env.OTEL_TRACES_EXPORTER ?? 'none').trim().toLowerCase();
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true' || exporterName === 'none' || exporterName === '') return undefined;
  if (exporterName !== 'otlp' && exporterName !== 'console') throw new UsageError('OTEL_TRACES_EXPORTER must be otlp, console or none');
  const sdk = await loadSdk(exporterName);
  const { trace, propagation, context } = await import('@opentelemetry/api');
  const exporter = exporterName === 'otlp' ? new sdk.OTLPTraceExporter() : new StderrSpanExporter();
  const provider = new sdk.BasicTracerProvider({
    resource: sdk.resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME?.trim() || 'hermes-aip' }),
    spanProcessors: [exporterName === 'otlp' ? new sdk.BatchSpanProcessor(exporter) : new sdk.SimpleSpanProcessor(exporter)],
  });
  context.setGlobalContextManager(new sdk.AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new sdk.W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  return () => provider.shutdown();
}

type Sdk = typeof import('@opentelemetry/sdk-trace-base') &
  Pick<typeof import('@opentelemetry/core'), 'W3CTraceContextPropagator'> &
  Pick<typeof import('@opentelemetry/resources'), 'resourceFromAttributes'> &
  Pick<typeof import('@opentelemetry/context-async-hooks'), 'AsyncLocalStorageContextManager'> & {
    OTLPTraceExporter: new () => SpanExporter;
  };

async function loadSdk(exporterName: 'otlp' | 'console'): Promise<Sdk> {
  try {
    const [traceBase, core, resources, asyncHooks] = await Promise.all([
      import('@opentelemetry/sdk-trace-base'),
      import('@opentelemetry/core'),
      import('@opentelemetry/resources'),
      import('@opentelemetry/context-async-hooks'),
    ]);
    const otlp = exporterName === 'otlp' ? await import('@opentelemetry/exporter-trace-otlp-http') : undefined;
    return {
      ...traceBase,
      W3CTraceContextPropagator: core.W3CTraceContextPropagator,
      resourceFromAttributes: resources.resourceFromAttributes,
      AsyncLocalStorageContextManager: asyncHooks.AsyncLocalStorageContextManager,
      OTLPTraceExporter: otlp?.OTLPTraceExporter as Sdk['OTLPTraceExporter'],
    };
  } catch {
    const extra = exporterName === 'otlp' ? ' @opentelemetry/exporter-trace-otlp-http@0.223.1' : '';
    throw new UsageError(`OTEL_TRACES_EXPORTER=${exporterName} needs the optional OpenTelemetry packages: npm install ${OPTIONAL_PACKAGES}${extra}`);
  }
}

/**
 * `console`: one JSON line per finished span, on stderr, because stdout carries the command's
 * own output (JSON lines from invoke, the MCP protocol on stdio).
 */
class StderrSpanExporter implements SpanExporter {
  export(spans: ReadableSpan[], done: (result: { code: number }) => void): void {
    for (const span of spans) process.stderr.write(`${JSON.stringify(spanRecord(span))}\n`);
    done({ code: 0 });
  }

  async shutdown(): Promise<void> {}
}

function spanRecord(span: ReadableSpan): Record<string, unknown> {
  const { traceId, spanId } = span.spanContext();
  return {
    name: span.name,
    kind: span.kind,
    traceId,
    spanId,
    parentSpanId: span.parentSpanContext?.spanId,
    startTime: span.startTime,
    duration: span.duration,
    status: span.status,
    attributes: span.attributes,
    events: span.events.map((event) => ({ name: event.name, attributes: event.attributes })),
  };
}
