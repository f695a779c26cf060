import {
  context as otelContext,
  metrics,
  propagation,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Counter,
  type Histogram,
  type Meter,
  type MeterProvider,
  type Span,
  type Tracer,
  type TracerProvider,
  type UpDownCounter,
} from '@opentelemetry/api';
import { PACKAGE_NAME, PACKAGE_VERSION } from './package-info.js';

export interface TelemetryOptions {
  /** Default: the global provider of `@opentelemetry/api` (a no-op until an SDK registers one). */
  tracerProvider?: TracerProvider;
  /** Default: the global provider, read when the connector is created: register an SDK before that. */
  meterProvider?: MeterProvider;
  /** Inject W3C trace context (through the global propagator) into Hermes requests; default true. */
  propagateTraceContext?: boolean;
}

/**
 * The connector's tracer, meter and instruments, following the OpenTelemetry semantic
 * conventions. With no SDK registered every call is a no-op: spans are non-recording and
 * attributes are only computed for recording spans.
 */
export class Telemetry {
  readonly tracer: Tracer;
  readonly meter: Meter;
  readonly propagateTraceContext: boolean;
  readonly invocations: Counter;
  readonly invocationDuration: Histogram;
  readonly activeInvocations: UpDownCounter;
  readonly runEvents: Counter;
  readonly ledgerDuration: Histogram;
  readonly bridgeJobs: UpDownCounter;

  constructor(options: TelemetryOptions = {}) {
    this.tracer = (options.tracerProvider ?? trace.getTracerProvider()).getTracer(PACKAGE_NAME, PACKAGE_VERSION);
    this.meter = (options.meterProvider ?? metrics.getMeterProvider()).getMeter(PACKAGE_NAME, PACKAGE_VERSION);
    this.propagateTraceContext = options.propagateTraceContext ?? true;
    this.invocations = this.meter.createCounter('aip.connector.invocations', { description: 'AIP actions the connector finished', unit: '{invocation}' });
    this.invocationDuration = this.meter.createHistogram('aip.connector.invocation.duration', { description: 'Duration of an AIP invocation', unit: 's' });
    this.activeInvocations = this.meter.createUpDownCounter('aip.connector.active_invocations', { description: 'AIP invocations in progress', unit: '{invocation}' });
    this.runEvents = this.meter.createCounter('hermes.run_events.events', { description: 'Hermes run events read from event streams', unit: '{event}' });
    this.ledgerDuration = this.meter.createHistogram('aip.ledger.operation.duration', { description: 'Duration of a run ledger operation', unit: 's' });
    this.bridgeJobs = this.meter.createUpDownCounter('herm.bridge.jobs', { description: 'Herm bridge jobs by state', unit: '{job}' });
  }

  /** An INTERNAL span under the host's active context (or `parent`). */
  startInternal(name: string, parent: Context = otelContext.active(), attributes?: Attributes): Span {
    return this.tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes }, parent);
  }

  /**
   * A CLIENT span for one HTTP request to Hermes, named `{method} {url.template}` (never with a
   * run id in it), and the headers with trace context injected when propagation is on.
   */
  startRequest(parent: Context, request: { method: string; template: string; origin: URL }, headers: Record<string, string>): Span {
    const span = this.tracer.startSpan(
      `${request.method} ${request.template}`,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          'http.request.method': request.method,
          'url.template': request.template,
          'server.address': request.origin.hostname,
          'server.port': Number(request.origin.port) || (request.origin.protocol === 'https:' ? 443 : 80),
        },
      },
      parent,
    );
    if (this.propagateTraceContext) propagation.inject(trace.setSpan(parent, span), headers);
    return span;
  }
}

/** Ends a CLIENT span with its response status (4xx and 5xx are errors for a client) or its failure. */
export function endRequestSpan(span: Span, statusCode: number | undefined, errorType?: string): void {
  if (statusCode !== undefined) span.setAttribute('http.response.status_code', statusCode);
  const failed = errorType ?? (statusCode !== undefined && statusCode >= 400 ? String(statusCode) : undefined);
  if (failed !== undefined) {
    span.setAttribute('error.type', failed);
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

/** Ends a span as an error of this type, or as a success. */
export function endSpan(span: Span, errorType: string | undefined): void {
  if (errorType !== undefined) {
    span.setAttribute('error.type', errorType);
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

/** The context in which a child of `span` starts. */
export function contextWith(span: Span, parent: Context = otelContext.active()): Context {
  return trace.setSpan(parent, span);
}
