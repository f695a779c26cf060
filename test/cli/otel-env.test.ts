/**
 * hermes-aip honours the standard OTEL_* variables: spans of an invocation go to stderr
 * (`console`) or to an OTLP/HTTP collector (`otlp`), traceparent reaches Hermes, and a bad
 * exporter name is a configuration error. Without the variables nothing is traced.
 */
import { createServer, type IncomingMessage } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli, simulatorWithConfig } from './helpers.js';

const statusArgs = (configPath: string) => ['invoke', 'cap:hermes_agent:local:run_status', '--config', configPath, '--input', '{"run_id":"run_otel_unknown"}'];
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

describe('hermes-aip with OTEL_* variables', { timeout: 60_000 }, () => {
  it('OTEL_TRACES_EXPORTER=console: one JSON line per span on stderr, stdout untouched, traceparent sent', async () => {
    const { sim, configPath } = await simulatorWithConfig();
    const run = await runCli(statusArgs(configPath), { env: { OTEL_TRACES_EXPORTER: 'console', OTEL_SERVICE_NAME: 'cli-test' } });
    expect(run.code).toBe(1);
    const spans = run.stderr
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { name: string; traceId: string; spanId: string; parentSpanId?: string });
    const invoke = spans.find((span) => span.name === 'aip.invoke run_status');
    const request = spans.find((span) => span.name === 'GET /v1/runs/{run_id}');
    expect(invoke).toBeDefined();
    expect(request?.parentSpanId).toBe(invoke?.spanId);
    expect(sim.requests[0]?.headers.traceparent).toBe(`00-${request?.traceId}-${request?.spanId}-01`);
    expect(() => JSON.parse(run.stdout)).not.toThrow();
    expect(run.stdout).not.toContain('spanId');
  });

  it('OTEL_TRACES_EXPORTER=otlp: the spans reach the collector named by OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, with the service name', async () => {
    const bodies: string[] = [];
    const collector = createServer((request: IncomingMessage, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      request.on('end', () => {
        bodies.push(`${request.method} ${request.url} ${request.headers['content-type']} ${body}`);
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
    closers.push(() => new Promise((resolve) => collector.close(() => resolve())));
    const { port } = collector.address() as { port: number };
    const { configPath } = await simulatorWithConfig();
    const run = await runCli(statusArgs(configPath), {
      env: { OTEL_TRACES_EXPORTER: 'otlp', OTEL_SERVICE_NAME: 'cli-otlp-test', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${port}/v1/traces` },
    });
    expect(run.code, run.stderr).toBe(1);
    const sent = bodies.join('\n');
    expect(sent).toMatch(/^POST \/v1\/traces application\/json /);
    expect(sent).toContain('aip.invoke run_status');
    expect(sent).toContain('cli-otlp-test');
  });

  it('an unknown exporter is a configuration error (exit 2) and nothing is sent', async () => {
    const { sim, configPath } = await simulatorWithConfig();
    const run = await runCli(statusArgs(configPath), { env: { OTEL_TRACES_EXPORTER: 'zipkin' } });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/OTEL_TRACES_EXPORTER must be otlp, console or none/);
    expect(sim.requests).toHaveLength(0);
  });

  it('without OTEL_TRACES_EXPORTER (or with OTEL_SDK_DISABLED=true) nothing is traced and no traceparent is sent', async () => {
    const { sim, configPath } = await simulatorWithConfig();
    await runCli(statusArgs(configPath));
    const disabled = await runCli(statusArgs(configPath), { env: { OTEL_TRACES_EXPORTER: 'console', OTEL_SDK_DISABLED: 'true' } });
    expect(disabled.stderr).not.toContain('spanId');
    expect(sim.requests.map((request) => request.headers.traceparent)).toEqual([undefined, undefined]);
  });
});
