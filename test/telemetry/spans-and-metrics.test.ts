/**
 * The connector's traces and metrics through the real OpenTelemetry SDK (in-memory span
 * exporter, a pull metric reader, the async-hooks context manager and the W3C propagator), for
 * a whole lifecycle, a failure, a replay, a cancellation and a stream. Nothing from a request or
 * an event may reach an attribute.
 */
import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { MeterProvider, type Histogram } from '@opentelemetry/sdk-metrics';
import { PullReader } from '../helpers/otel.js';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { API_KEY, eventually, grantFor, harnessFactory, nextId, script, type Harness } from '../helpers/harness.js';

const exporter = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const contextManager = new AsyncLocalStorageContextManager();

beforeAll(() => {
  context.setGlobalContextManager(contextManager.enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
});
afterAll(() => {
  context.disable();
  propagation.disable();
});
beforeEach(() => exporter.reset());

const harness = harnessFactory();

async function withTelemetry(options: { propagateTraceContext?: boolean } = {}): Promise<{ h: Harness; reader: PullReader }> {
  const reader = new PullReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const h = await harness({ connector: { tracerProvider, meterProvider, ...options } });
  return { h, reader };
}

const spans = () => exporter.getFinishedSpans();
const named = (name: string) => spans().filter((span) => span.name === name);
const only = (name: string): ReadableSpan => {
  const found = named(name);
  expect(
    found.map((span) => span.name),
    `exactly one span ${name} among ${spans()
      .map((s) => s.name)
      .join(', ')}`,
  ).toEqual([name]);
  return found[0]!;
};
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;
const childrenOf = (parent: ReadableSpan) => spans().filter((span) => parentOf(span) === parent.spanContext().spanId);

describe('a lifecycle: start, stream with an approval, approve, status', () => {
  it('one INTERNAL span per invoke with CLIENT children named by URL template; traceparent reaches Hermes', async () => {
    const { h } = await withTelemetry();
    const command = 'rm -rf ./scratch-otel-canary';
    const start = await h.invoke(
      {
        capability_id: h.cap('run_start'),
        input: { body: { input: 'prompt-otel-canary', sim_script: script.approval(command) } },
        idempotency_key: nextId('key'),
      },
      { tenantId: 'tenant-otel', traceId: 'aip-trace-1' },
    );
    const runId = (start.output as { run_id: string }).run_id;
    const startSpan = only('aip.invoke run_start');
    expect(startSpan.kind).toBe(SpanKind.INTERNAL);
    expect(startSpan.attributes).toMatchObject({
      'aip.action_id': start.action_id,
      'aip.capability_id': h.cap('run_start'),
      'aip.tenant_id': 'tenant-otel',
      'aip.trace_id': 'aip-trace-1',
      'hermes.endpoint_id': 'local',
      'hermes.operation': 'run_start',
      'hermes.run_id': runId,
      'aip.result.status': 'completed',
      'aip.uncertain_outcome': false,
      'aip.replayed': false,
    });
    expect(startSpan.status.code).not.toBe(SpanStatusCode.ERROR);
    const post = only('POST /v1/runs');
    expect(post.kind).toBe(SpanKind.CLIENT);
    expect(parentOf(post)).toBe(startSpan.spanContext().spanId);
    expect(post.attributes).toMatchObject({
      'http.request.method': 'POST',
      'url.template': '/v1/runs',
      'server.address': '127.0.0.1',
      'server.port': h.sim.port,
      'http.response.status_code': 202,
    });
    // The W3C header names the CLIENT span, in the invocation's trace.
    const sent = h.sim.requests.find((request) => request.method === 'POST' && request.path === '/v1/runs');
    expect(sent?.headers.traceparent).toBe(`00-${post.spanContext().traceId}-${post.spanContext().spanId}-01`);
    // Ledger calls run under the invocation: the claim, then the outcome with the run's binding (and,
    // at most once a minute, the purge of expired keys).
    const ledgerSpans = childrenOf(startSpan).filter((span) => span.name.startsWith('aip.ledger '));
    expect(ledgerSpans.map((span) => span.name).filter((name) => name !== 'aip.ledger purgeExpired')).toEqual(['aip.ledger claim', 'aip.ledger settle']);
    expect(ledgerSpans[0]?.attributes).toMatchObject({ 'aip.ledger.backend': 'memory' });

    const events = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId, max_events: 4 } });
    expect(events.error?.code).toBe('connector.hermes_agent.stream_truncated');
    const stream = only('GET /v1/runs/{run_id}/events');
    expect(stream.events.map((event) => event.name)).toEqual(['hermes.event.first', 'hermes.approval.request']);
    // The first turn's text (reasoning.available) and tool.started come before the approval, as on a real Hermes.
    expect(stream.attributes['hermes.run_events.count']).toBe(4);
    await eventually(() => h.sim.run(runId)?.pendingApprovals === 1 || undefined, 'approval pending');

    const input = { run_id: runId, choice: 'once' };
    await h.invoke({ capability_id: h.cap('run_approval'), input, idempotency_key: nextId('key') }, { approval: grantFor(input) });
    expect(only('POST /v1/runs/{run_id}/approval').attributes['url.template']).toBe('/v1/runs/{run_id}/approval');
    await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: runId } });
    only('GET /v1/runs/{run_id}');

    for (const span of spans()) expect(span.name).not.toContain(runId);
    const everything = JSON.stringify(spans().map((span) => ({ name: span.name, attributes: span.attributes, events: span.events })));
    for (const secret of [API_KEY, 'prompt-otel-canary', command, 'Checking ']) expect(everything).not.toContain(secret);
  });
});

describe('failures, replays, cancellations', () => {
  it('a failed invocation: status ERROR with the error code; its request span has the HTTP status as error.type', async () => {
    const { h } = await withTelemetry();
    await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: 'run_unknown' } });
    const invoke = only('aip.invoke run_status');
    expect(invoke.status.code).toBe(SpanStatusCode.ERROR);
    expect(invoke.attributes).toMatchObject({
      'error.type': 'connector.hermes_agent.not_found',
      'aip.result.status': 'failed',
      'hermes.run_id': 'run_unknown',
    });
    const get = only('GET /v1/runs/{run_id}');
    expect(get.status.code).toBe(SpanStatusCode.ERROR);
    expect(get.attributes).toMatchObject({ 'http.response.status_code': 404, 'error.type': '404' });
  });

  it('a refusal before Hermes has no request span, and an unverified tenant is not recorded', async () => {
    const { h } = await withTelemetry();
    await h.invoke({ capability_id: h.cap('run_start'), input: { body: { input: 'hi' } } }, { tenantId: 'not-verified-yet', approval: undefined });
    const invoke = only('aip.invoke run_start');
    expect(invoke.attributes['error.type']).toBe('connector.hermes_agent.idempotency_key_required');
    expect(invoke.attributes).not.toHaveProperty('aip.tenant_id');
    expect(childrenOf(invoke).filter((span) => span.kind === SpanKind.CLIENT)).toEqual([]);
  });

  it('refused input reaches no attribute: an extra run_id on run_start, a 100,000-character run_id on run_status', async () => {
    const { h } = await withTelemetry();
    const canary = 'CONFIDENTIAL-otel-run-id-canary';
    const extra = await h.invoke({ capability_id: h.cap('run_start'), input: { body: { input: 'hi' }, run_id: canary }, idempotency_key: nextId('key') });
    const huge = await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: `run_${'x'.repeat(100_000)}` } });
    expect([extra.error?.code, huge.error?.code]).toEqual(['connector.hermes_agent.invalid_input', 'connector.hermes_agent.invalid_input']);
    for (const span of [only('aip.invoke run_start'), only('aip.invoke run_status')]) {
      expect(span.attributes).not.toHaveProperty('hermes.run_id');
      const recorded = JSON.stringify([span.attributes, span.events]);
      expect(recorded).not.toContain(canary);
      expect(recorded).not.toContain('xxxxxxxx');
    }
  });

  it('attributes from the verified context are bounded in length', async () => {
    const { h } = await withTelemetry();
    const tenantId = `tenant-${'t'.repeat(100_000)}`;
    const traceId = `trace-${'c'.repeat(100_000)}`;
    await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: 'run_unknown' } }, { tenantId, traceId });
    const invoke = only('aip.invoke run_status');
    for (const [name, full] of [
      ['aip.tenant_id', tenantId],
      ['aip.trace_id', traceId],
    ] as const) {
      const value = invoke.attributes[name] as string;
      expect(value.length, name).toBeLessThanOrEqual(512);
      expect(full.startsWith(value.replace(/…$/, '')), name).toBe(true);
    }
    expect(invoke.attributes['hermes.run_id']).toBe('run_unknown');
  });

  it('a replay: aip.replayed, and no request span', async () => {
    const { h } = await withTelemetry();
    const key = nextId('key');
    const action = { capability_id: h.cap('run_start'), input: { body: { input: 'hi' } }, idempotency_key: key };
    await h.invoke(action);
    exporter.reset();
    await h.invoke(action);
    expect(only('aip.invoke run_start').attributes['aip.replayed']).toBe(true);
    expect(named('POST /v1/runs')).toEqual([]);
  });

  it("cancel(): an aip.cancel run_stop span with the stop's request under it", async () => {
    const { h } = await withTelemetry();
    const runId = await h.startRun({ input: 'long', sim_script: script.long() });
    exporter.reset();
    await h.cancel({ capability_id: h.cap('run_events'), input: { run_id: runId } });
    const cancel = only('aip.cancel run_stop');
    expect(parentOf(only('POST /v1/runs/{run_id}/stop'))).toBe(cancel.spanContext().spanId);
  });

  it("the host's active span is the invocation's parent", async () => {
    const { h } = await withTelemetry();
    const host = tracerProvider.getTracer('host').startSpan('host.request');
    await context.with(trace.setSpan(context.active(), host), () => h.invoke({ capability_id: h.cap('run_status'), input: { run_id: 'run_unknown' } }));
    host.end();
    expect(parentOf(only('aip.invoke run_status'))).toBe(host.spanContext().spanId);
  });

  it('propagateTraceContext: false sends no traceparent', async () => {
    const { h } = await withTelemetry({ propagateTraceContext: false });
    await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: 'run_unknown' } });
    expect(h.sim.requests[0]?.headers).not.toHaveProperty('traceparent');
    only('GET /v1/runs/{run_id}');
  });
});

describe('a stream to its end', () => {
  it('span events for the first and terminal events, and events counted by kind', async () => {
    const { h, reader } = await withTelemetry();
    const runId = await h.startRun({ input: 'hi', sim_script: script.quick() });
    await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } });
    const stream = only('GET /v1/runs/{run_id}/events');
    expect(stream.events.map((event) => [event.name, event.attributes?.['hermes.event.name']])).toEqual([
      ['hermes.event.first', 'message.delta'],
      ['hermes.event.terminal', 'run.completed'],
    ]);
    const counted = (await reader.points('hermes.run_events.events')).map((point) => [point.attributes['hermes.event.kind'], point.value]);
    expect(counted).toEqual(
      expect.arrayContaining([
        ['message.delta', 2],
        ['run.completed', 1],
      ]),
    );
  });

  it("a provider's 100,000-character event name is cut to a bounded span event attribute", async () => {
    const { h } = await withTelemetry();
    const name = `custom.${'e'.repeat(100_000)}`;
    const runId = await h.startRun({
      input: 'hi',
      sim_script: [
        { type: 'raw', data: `event: ${name}\ndata: {}\n\n` },
        { type: 'complete', output: 'ok' },
      ],
    });
    await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } });
    const first = only('GET /v1/runs/{run_id}/events').events.find((event) => event.name === 'hermes.event.first');
    const recorded = first?.attributes?.['hermes.event.name'] as string;
    expect(recorded.length).toBeLessThanOrEqual(512);
    expect(name.startsWith(recorded.replace(/…$/, ''))).toBe(true);
  });
});

describe('metrics', () => {
  it('invocations, their duration and the active count; ledger durations by method and backend; bounded attributes only', async () => {
    const { h, reader } = await withTelemetry();
    const runId = await h.startRun({ input: 'hi', sim_script: script.quick() });
    await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: 'run_unknown' } });
    const invocations = await reader.points('aip.connector.invocations');
    expect(invocations.map((point) => ({ ...point.attributes, value: point.value }))).toEqual(
      expect.arrayContaining([
        { 'aip.capability.operation': 'run_start', 'aip.result.status': 'completed', 'hermes.endpoint_id': 'local', value: 1 },
        {
          'aip.capability.operation': 'run_status',
          'aip.result.status': 'failed',
          'error.type': 'connector.hermes_agent.not_found',
          'hermes.endpoint_id': 'local',
          value: 1,
        },
      ]),
    );
    const durations = await reader.points('aip.connector.invocation.duration');
    expect(durations.reduce((sum, point) => sum + (point.value as Histogram).count, 0)).toBe(2);
    const active = await reader.points('aip.connector.active_invocations');
    expect(active.map((point) => point.value)).toEqual([0]);
    const ledger = await reader.points('aip.ledger.operation.duration');
    expect(ledger.map((point) => point.attributes)).toEqual(expect.arrayContaining([{ 'aip.ledger.backend': 'memory', 'aip.ledger.method': 'claim' }]));
    const allAttributes = JSON.stringify([...invocations, ...durations, ...active, ...ledger].map((point) => point.attributes));
    expect(allAttributes).not.toContain(runId);
    expect(allAttributes).not.toContain('act_');
  });
});
