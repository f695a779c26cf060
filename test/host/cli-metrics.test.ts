/**
 * `GET /metrics` of the running host, scraped over HTTP and parsed: the reference's eight series first
 * and unchanged, then build info, Node's process and runtime metrics, and the latency histograms of
 * actions and of Hermes calls, whose labels stay a bounded set however many runs and actions pass.
 */
import { describe, expect, it } from 'vitest';
import { PACKAGE_VERSION } from '../../src/internal/package-info.js';
import { respondJson, respondNotFound, respondStatus } from '../helpers/fault-server.js';
import { type FaultHermesHost, launchHostOverFaultHermes, postMessage, statusAction } from './fault-hermes-host.js';
import { waitUntil } from './host-process.js';

interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** The samples of a Prometheus text exposition (comments skipped). */
function parseExposition(text: string): Sample[] {
  return text
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (match === null) throw new Error(`not an exposition line: ${line}`);
      const labels = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map(([, key, value]) => [key, value]));
      return { name: match[1] as string, labels, value: Number(match[3]) };
    });
}

function seriesKey(sample: Sample): string {
  return `${sample.name}${JSON.stringify(Object.entries(sample.labels).sort())}`;
}

function valueOf(samples: Sample[], name: string, labels: Record<string, string>): number | undefined {
  return samples.find((sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value))?.value;
}

async function scrape(host: FaultHermesHost): Promise<{ contentType: string | null; text: string; samples: Sample[] }> {
  const response = await fetch(`${host.base}/metrics`);
  const text = await response.text();
  return { contentType: response.headers.get('content-type'), text, samples: parseExposition(text) };
}

/** Hermes: a completed run for `run_ok_*`, its 404 for `run_gone_*`. */
async function startHost(): Promise<FaultHermesHost> {
  const host = await launchHostOverFaultHermes({}, { HERMES_AIP_REVISION: 'feedc0de' });
  host.hermes.handle((exchange) => {
    if (exchange.request.target === '/health') return respondJson(200, { status: 'ok' })(exchange);
    return exchange.request.target.startsWith('/v1/runs/run_gone_') ? respondNotFound(exchange) : respondStatus('completed')(exchange);
  });
  await waitUntil(async () => (await fetch(`${host.base}/ready`)).status === 200, 'the host to be ready');
  return host;
}

/** Sends run_status actions for `count` fresh run and action ids of each kind, ten of each at a time; returns every id used. */
async function sendActions(host: FaultHermesHost, prefix: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let start = 0; start < count; start += 10) {
    const batch = Array.from({ length: Math.min(10, count - start) }, (_, index) => start + index).flatMap((index) =>
      ['ok', 'gone'].map((kind) => ({ runId: `run_${kind}_${prefix}${index}`, actionId: `act_${kind}_${prefix}${index}` })),
    );
    const answers = await Promise.all(batch.map(({ runId, actionId }) => postMessage(host, statusAction(host, runId, actionId))));
    for (const answer of answers) expect(answer.status).toBe(200);
    ids.push(...batch.flatMap(({ runId, actionId }) => [runId, actionId]));
  }
  return ids;
}

const ACTIONS = 'hermes_aip_action_duration_seconds';
const PROVIDER = 'hermes_aip_provider_request_duration_seconds';

describe('hermes-aip host: metrics a platform team scrapes', { timeout: 120_000 }, () => {
  it('serves build info, process metrics and bounded latency histograms after the reference eight', async () => {
    const host = await startHost();
    await sendActions(host, 'warm', 1);
    const before = await scrape(host);
    const ids = await sendActions(host, 'flood', 40);
    const after = await scrape(host);

    expect(after.contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(after.text.startsWith('# TYPE aip_connector_host_ready gauge\naip_connector_host_ready 1\n')).toBe(true);
    expect(after.samples.slice(0, 8).map((sample) => [sample.name, Object.keys(sample.labels).length])).toEqual(
      [
        'ready',
        'storage_ready',
        'in_flight',
        'requests_total',
        'rejected_total',
        'heartbeat_failures_total',
        'lease_recovery_attempts_total',
        'lease_recoveries_total',
      ].map((name) => [`aip_connector_host_${name}`, 0]),
    );
    expect(valueOf(after.samples, 'aip_connector_host_requests_total', {})).toBe(82);

    expect(after.samples.filter((sample) => sample.name === 'hermes_aip_build_info')).toEqual([
      { name: 'hermes_aip_build_info', labels: { version: PACKAGE_VERSION, revision: 'feedc0de' }, value: 1 },
    ]);
    for (const name of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'process_start_time_seconds', 'nodejs_eventloop_lag_seconds']) {
      expect(valueOf(after.samples, name, {}), name).toBeGreaterThan(0);
    }
    expect(valueOf(after.samples, 'nodejs_heap_size_used_bytes', {})).toBeGreaterThan(0);

    expect(valueOf(after.samples, `${ACTIONS}_count`, { operation: 'run_status', outcome: 'completed' })).toBe(41);
    expect(valueOf(after.samples, `${ACTIONS}_count`, { operation: 'run_status', outcome: 'failed' })).toBe(41);
    expect(valueOf(after.samples, `${ACTIONS}_bucket`, { operation: 'run_status', outcome: 'completed', le: '+Inf' })).toBe(41);
    expect(valueOf(after.samples, `${ACTIONS}_sum`, { operation: 'run_status', outcome: 'completed' })).toBeGreaterThan(0);

    const statusReads = (gone: boolean) =>
      host.hermes.requests.filter((request) => request.target.startsWith('/v1/runs/') && request.target.includes('_gone_') === gone).length;
    expect(statusReads(false)).toBeGreaterThanOrEqual(41);
    expect(valueOf(after.samples, `${PROVIDER}_count`, { operation: 'run_status', outcome: '2xx' })).toBe(statusReads(false));
    expect(valueOf(after.samples, `${PROVIDER}_count`, { operation: 'run_status', outcome: '4xx' })).toBe(statusReads(true));
    const healthChecks = valueOf(after.samples, `${PROVIDER}_count`, { operation: 'health', outcome: '2xx' }) ?? 0;
    expect(healthChecks).toBeGreaterThan(0);
    expect(healthChecks).toBeLessThanOrEqual(host.hermes.requests.filter((request) => request.target === '/health').length);

    // 82 distinct runs and actions later, not one series more; no id or Hermes address in any label.
    const ours = (samples: Sample[]) => samples.filter((sample) => /^(hermes_aip|aip_connector_host)_/.test(sample.name)).map(seriesKey);
    expect(new Set(ours(after.samples))).toEqual(new Set(ours(before.samples)));
    expect(ours(after.samples)).toHaveLength(ours(before.samples).length);
    for (const id of ids) expect(after.text).not.toContain(id);
    expect(after.text).not.toContain(new URL(host.hermes.url).host);
  });

  it('reports an unknown revision when the image did not set one', async () => {
    const host = await launchHostOverFaultHermes({});
    const { samples } = await scrape(host);
    expect(samples.filter((sample) => sample.name === 'hermes_aip_build_info').map((sample) => sample.labels)).toEqual([
      { version: PACKAGE_VERSION, revision: 'unknown' },
    ]);
  });
});
