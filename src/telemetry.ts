import {
  context as otelContext,
  INVALID_SPAN_CONTEXT,
  metrics,
  createNoopMeter,
  propagation,
  ProxyTracerProvider,
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
import { KNOWN_EVENT_KINDS } from './contract/hermes-vocabulary.js';
import { PACKAGE_NAME, PACKAGE_VERSION } from './internal/package-info.js';

export interface TelemetryOptions {
  /** Default: the global provider of `@opentelemetry/api` (a no-op until an SDK registers one). */
  tracerProvider?: TracerProvider;
  /** Default: the global provider, read when the connector is created: register an SDK before that. */
  meterProvider?: MeterProvider;
  /** Inject W3C trace context (through the global propagator) into Hermes requests; default true. */
  propagateTraceContext?: boolean;
}

/**
 * The longest string an attribute carries. Ids the schemas bound stay whole (a run id is at most
 * 512 UTF-8 bytes, an action id 256 characters); a longer value from the host's context or a peer is cut.
 */
const MAX_ATTRIBUTE_CHARS = 512;

/** The span every untraced piece of work gets: nothing recorded, nothing allocated per call. */
const UNTRACED: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/**
 * The connector's tracer, meter and instruments, following the OpenTelemetry semantic
 * conventions. With no SDK registered nothing is done per call: `tracing` is false until a
 * global tracer provider is registered (checked on each call, since the API's proxy binds late),
 * `metering` is false when the meter is the API's no-op one (metrics bind when created).
 */
export class Telemetry {
  readonly tracer: Tracer;
  readonly meter: Meter;
  readonly metering: boolean;
  /** The global provider's proxy, when no provider was given: it says whether an SDK is registered yet. */
  readonly #globalTracing: ProxyTracerProvider | undefined;
  readonly propagateTraceContext: boolean;
  readonly invocations: Counter;
  readonly invocationDuration: Histogram;
  readonly activeInvocations: UpDownCounter;
  readonly runEvents: Counter;
  readonly ledgerDuration: Histogram;
  readonly bridgeJobs: UpDownCounter;

  constructor(options: TelemetryOptions = {}) {
    const tracerProvider = options.tracerProvider ?? trace.getTracerProvider();
    this.#globalTracing = tracerProvider instanceof ProxyTracerProvider ? tracerProvider : undefined;
    this.tracer = tracerProvider.getTracer(PACKAGE_NAME, PACKAGE_VERSION);
    this.meter = (options.meterProvider ?? metrics.getMeterProvider()).getMeter(PACKAGE_NAME, PACKAGE_VERSION);
    // The API's no-op provider hands out this one shared meter.
    this.metering = this.meter !== createNoopMeter();
    this.propagateTraceContext = options.propagateTraceContext ?? true;
    this.invocations = this.meter.createCounter('aip.connector.invocations', { description: 'AIP actions the connector finished', unit: '{invocation}' });
    this.invocationDuration = this.meter.createHistogram('aip.connector.invocation.duration', { description: 'Duration of an AIP invocation', unit: 's' });
    this.activeInvocations = this.meter.createUpDownCounter('aip.connector.active_invocations', {
      description: 'AIP invocations in progress',
      unit: '{invocation}',
    });
    this.runEvents = this.meter.createCounter('hermes.run_events.events', { description: 'Hermes run events read from event streams', unit: '{event}' });
    this.ledgerDuration = this.meter.createHistogram('aip.ledger.operation.duration', { description: 'Duration of a run ledger operation', unit: 's' });
    this.bridgeJobs = this.meter.createUpDownCounter('herm.bridge.jobs', { description: 'Herm bridge jobs by state', unit: '{job}' });
  }

  /** Whether spans are worth starting: a provider was given, or an SDK registered a global one. */
  get tracing(): boolean {
    return this.#globalTracing === undefined || this.#globalTracing.getDelegateTracer(PACKAGE_NAME, PACKAGE_VERSION) !== undefined;
  }

  /** An INTERNAL span under the host's active context (or `parent`). */
  startInternal(name: string, parent: Context = otelContext.active(), attributes?: Attributes): Span {
    if (!this.tracing) return UNTRACED;
    return this.tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes: attributes && boundedAttributes(attributes) }, parent);
  }

  /**
   * A CLIENT span for one HTTP request to Hermes, named `{method} {url.template}` (never with a
   * run id in it), and the headers with trace context injected when propagation is on.
   */
  startRequest(
    parent: Context,
    request: { method: string; template: string; server: { address: string; port: number } },
    headers: Record<string, string>,
  ): Span {
    if (!this.tracing) {
      // A host may propagate a context it extracted without tracing anything itself.
      if (this.propagateTraceContext) propagation.inject(parent, headers);
      return UNTRACED;
    }
    const span = this.tracer.startSpan(
      `${request.method} ${request.template}`,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          'http.request.method': request.method,
          'url.template': request.template,
          'server.address': request.server.address,
          'server.port': request.server.port,
        },
      },
      parent,
    );
    if (this.propagateTraceContext) propagation.inject(trace.setSpan(parent, span), headers);
    return span;
  }
}

/**
 * Ends a CLIENT span with its response status or its failure. As the HTTP conventions say, a
 * 4xx or 5xx is an error whose type is the status code; a failure without one (a reset, a
 * timeout, a bad body) has the transport's code, else the connector's failure code.
 */
export function endRequestSpan(span: Span, statusCode: number | undefined, errorType?: string): void {
  if (span === UNTRACED) return;
  if (statusCode !== undefined) span.setAttribute('http.response.status_code', statusCode);
  const failed = statusCode !== undefined && statusCode >= 400 ? String(statusCode) : errorType;
  if (failed !== undefined) {
    span.setAttribute('error.type', failed);
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

/** The `error.type` of a failed request: a transport code when there is one, else the failure's code or class. */
export function errorTypeOf(error: unknown): string {
  const failure = error as { code?: unknown; details?: { transport_code?: unknown } } | null;
  const code = failure?.details?.transport_code ?? failure?.code;
  if (typeof code === 'string') return code;
  return error instanceof Error ? error.name : 'unknown';
}

/** Ends a span as an error of this type, or as a success. */
export function endSpan(span: Span, errorType: string | undefined): void {
  if (span === UNTRACED) return;
  if (errorType !== undefined) {
    span.setAttribute('error.type', errorType);
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

/** The attributes with every string cut to MAX_ATTRIBUTE_CHARS (an ellipsis marks a cut; a surrogate pair is never split). */
function boundedAttributes(attributes: Attributes): Attributes {
  const bounded: Attributes = {};
  for (const [name, value] of Object.entries(attributes)) bounded[name] = typeof value === 'string' ? boundedString(value) : value;
  return bounded;
}

function boundedString(value: string): string {
  if (value.length <= MAX_ATTRIBUTE_CHARS) return value;
  let end = MAX_ATTRIBUTE_CHARS - 1;
  const last = value.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${value.slice(0, end)}…`;
}

/** The context in which a child of `span` starts (the parent itself for an untraced span). */
export function contextWith(span: Span, parent: Context = otelContext.active()): Context {
  return span === UNTRACED ? parent : trace.setSpan(parent, span);
}

/** What an invocation's span and metrics record about its result. */
export interface InvocationOutcome {
  status: string;
  errorCode: string | undefined;
  uncertainOutcome: boolean;
  replayed: boolean;
  runId: string | undefined;
}

/**
 * One invocation's span (`aip.invoke <operation>`, or `aip.cancel …` for the host's cancel) and
 * its metric points. Children (HTTP requests, ledger calls) start in `context`.
 */
export class InvocationTrace {
  readonly span: Span;
  readonly context: Context;
  readonly #telemetry: Telemetry;
  readonly #verb: string;
  /** Read only for the duration metric: no clock read per invocation without a meter. */
  readonly #startedAt: number;
  #operation = 'unknown';
  #endpointId = 'unknown';

  constructor(telemetry: Telemetry, hostCancellation: boolean) {
    this.#telemetry = telemetry;
    this.#verb = hostCancellation ? 'aip.cancel' : 'aip.invoke';
    const parent = otelContext.active();
    this.span = telemetry.startInternal(this.#verb, parent);
    this.context = contextWith(this.span, parent);
    this.#startedAt = telemetry.metering ? performance.now() : 0;
    if (telemetry.metering) telemetry.activeInvocations.add(1);
  }

  /** Whether finish() records anything: a span that records, or metrics. */
  get recording(): boolean {
    return this.span !== UNTRACED || this.#telemetry.metering;
  }

  /** `work(a, b)` run with the invocation's span active; untraced, the active context already is the invocation's. */
  within<A, B, T>(work: (a: A, b: B) => T, a: A, b: B): T {
    return this.span === UNTRACED ? work(a, b) : otelContext.with(this.context, work, undefined, a, b);
  }

  resolved(actionId: string, capabilityId: string, endpointId: string, operation: string): void {
    this.#operation = operation;
    this.#endpointId = endpointId;
    if (!this.span.isRecording()) return;
    this.span.updateName(`${this.#verb} ${operation}`);
    this.span.setAttributes(
      boundedAttributes({
        'aip.action_id': actionId,
        'aip.capability_id': capabilityId,
        'hermes.endpoint_id': endpointId,
        'hermes.operation': operation,
      }),
    );
  }

  /** After the policy gates: a tenant recorded here is a verified one. */
  admitted(context: { tenantId?: string; traceId?: string }): void {
    if (!this.span.isRecording()) return;
    if (context.tenantId !== undefined) this.span.setAttribute('aip.tenant_id', boundedString(context.tenantId));
    if (context.traceId !== undefined) this.span.setAttribute('aip.trace_id', boundedString(context.traceId));
  }

  finish(outcome: InvocationOutcome): void {
    if (this.#telemetry.metering) this.#record(outcome);
    if (this.span.isRecording()) {
      this.span.setAttributes({ 'aip.result.status': outcome.status, 'aip.uncertain_outcome': outcome.uncertainOutcome, 'aip.replayed': outcome.replayed });
      if (outcome.runId !== undefined) this.span.setAttribute('hermes.run_id', boundedString(outcome.runId));
    }
    endSpan(this.span, outcome.status === 'failed' ? (outcome.errorCode ?? 'failed') : undefined);
  }

  #record(outcome: InvocationOutcome): void {
    const telemetry = this.#telemetry;
    telemetry.activeInvocations.add(-1);
    const attributes: Attributes = { 'aip.capability.operation': this.#operation, 'aip.result.status': outcome.status, 'hermes.endpoint_id': this.#endpointId };
    if (outcome.errorCode !== undefined) attributes['error.type'] = outcome.errorCode;
    telemetry.invocations.add(1, attributes);
    telemetry.invocationDuration.record((performance.now() - this.#startedAt) / 1000, attributes);
  }
}

/**
 * What an event stream records on its CLIENT span: span events for the first event, every
 * `approval.request` and the terminal event (never one span per event), the event count, and
 * the events by kind, counted once when the stream ends.
 */
export class StreamTrace {
  readonly recording: boolean;
  readonly #telemetry: Telemetry;
  readonly #span: Span;

  constructor(telemetry: Telemetry, span: Span) {
    this.#telemetry = telemetry;
    this.#span = span;
    this.recording = span.isRecording();
  }

  /** `name` is the provider's, of any length up to a frame: recorded bounded. */
  event(name: string, count: number, terminal: boolean): void {
    if (count === 1) this.#span.addEvent('hermes.event.first', { 'hermes.event.name': boundedString(name) });
    if (name === 'approval.request') this.#span.addEvent('hermes.approval.request');
    if (terminal) this.#span.addEvent('hermes.event.terminal', { 'hermes.event.name': name });
  }

  /** Counts the events by kind (any kind Hermes does not document is `other`, so the attribute stays a bounded set). */
  finish(events: ReadonlyArray<{ event: string }>): void {
    if (this.recording) this.#span.setAttribute('hermes.run_events.count', events.length);
    if (!this.#telemetry.metering || events.length === 0) return;
    const byKind = new Map<string, number>();
    for (const { event } of events) {
      const kind = KNOWN_EVENT_KINDS.has(event) ? event : 'other';
      byKind.set(kind, (byKind.get(kind) ?? 0) + 1);
    }
    for (const [kind, count] of byKind) this.#telemetry.runEvents.add(count, { 'hermes.event.kind': kind });
  }
}
