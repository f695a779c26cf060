/** examples/otel.ts runs and prints the lifecycle's spans: invocations, their Hermes requests and ledger calls. */
import { describe, expect, it } from 'vitest';
import { runExample } from './run-example.js';

describe('examples/otel.ts', () => {
  it('prints a span per invocation, per Hermes request and per ledger call, with no run id in a span name', { timeout: 60_000 }, async () => {
    const { stdout, stderr } = await runExample('otel.ts');
    expect(stderr).toBe('');
    const names = stdout
      .trimEnd()
      .split('\n')
      .map((line) => line.slice(0, line.indexOf('  ')));
    expect(names).toEqual(
      expect.arrayContaining([
        'aip.invoke run_start',
        'POST /v1/runs',
        'aip.ledger claim',
        'aip.invoke run_events',
        'GET /v1/runs/{run_id}/events',
        'aip.invoke run_status',
        'GET /v1/runs/{run_id}',
      ]),
    );
    expect(stdout).toContain('"aip.tenant_id":"tenant-a"');
    expect(stdout).toContain('"aip.trace_id":"trace-otel-example"');
    for (const name of names) expect(name).not.toMatch(/run_[0-9a-f]{32}/);
  });
});
