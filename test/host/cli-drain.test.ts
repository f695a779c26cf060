/**
 * `hermes-aip host` draining with work in flight: an action running when SIGTERM arrives finishes
 * and is answered while new actions are refused; one that outlives the drain timeout is cancelled,
 * and the host still goes offline and exits 0.
 */
import { describe, expect, it } from 'vitest';
import { neverRespond, respondJson, respondStatus } from '../helpers/fault-server.js';
import { type FaultHermesHost, launchHostOverFaultHermes, postMessage as post, statusAction } from './fault-hermes-host.js';
import { waitUntil } from './host-process.js';

function startHost(drainTimeoutMs: number): Promise<FaultHermesHost> {
  return launchHostOverFaultHermes({ DRAIN_TIMEOUT_MS: String(drainTimeoutMs) });
}

describe('hermes-aip host: draining with work in flight', { timeout: 60_000 }, () => {
  it('answers the action in flight, refuses new ones, then drains, goes offline and exits 0', async () => {
    const host = await startHost(20_000);
    let release = (): void => {};
    const released = new Promise<void>((resolve) => (release = resolve));
    host.hermes.handle(async (exchange) => {
      if (exchange.request.target.startsWith('/health')) return respondJson(200, { status: 'ok' })(exchange);
      await released;
      return respondStatus('running')(exchange);
    });
    const inFlight = post(host, statusAction(host, 'run_in_flight'));
    await waitUntil(() => host.hermes.requests.some((request) => request.target === '/v1/runs/run_in_flight'));

    host.child.kill('SIGTERM');
    await waitUntil(() => host.stub.records.some((record) => record.operation === 'drain'));
    const refused = await post(host, statusAction(host, 'run_late'));
    expect(refused.status).toBe(503);
    expect(refused.body['body']['error']['error']).toMatchObject({ code: 'connector_host.not_ready', category: 'temporary', retryable: true });
    expect(host.stub.records.some((record) => record.operation === 'offline')).toBe(false);
    const metrics = await (await fetch(`${host.base}/metrics`)).text();
    expect(metrics).toContain('aip_connector_host_ready 0\n');
    expect(metrics).toContain('aip_connector_host_in_flight 1\n');
    expect(metrics).toContain('aip_connector_host_requests_total 2\n');
    expect(metrics).toContain('aip_connector_host_rejected_total 1\n');

    release();
    const answered = await inFlight;
    expect(answered.status).toBe(200);
    expect(answered.body['body']['action_result']).toMatchObject({ status: 'completed' });
    const run = await host.exit;
    expect(run.code, run.stderr).toBe(0);
    expect(host.stub.records.at(-1)?.operation).toBe('offline');
    expect(host.hermes.requests.some((request) => request.target === '/v1/runs/run_late')).toBe(false);
  });

  it('cancels an action that outlives the drain timeout, and still goes offline and exits 0', async () => {
    const host = await startHost(1_000);
    host.hermes.handle((exchange) => (exchange.request.target.startsWith('/health') ? respondJson(200, { status: 'ok' })(exchange) : neverRespond(exchange)));
    const inFlight = post(host, statusAction(host, 'run_stuck')).catch((error: Error) => ({
      status: 0,
      body: { error: error.message } as Record<string, any>,
    }));
    await waitUntil(() => host.hermes.requests.some((request) => request.target === '/v1/runs/run_stuck'));
    host.child.kill('SIGTERM');
    const run = await host.exit;
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain('drain timeout reached: cancelling the actions still in flight');
    const answered = await inFlight;
    expect(answered.status).toBe(200);
    expect(answered.body['body']['action_result']).toMatchObject({ status: 'cancelled' });
    const operations = host.stub.records.map((record) => record.operation);
    expect(operations.slice(-2)).toEqual(['drain', 'offline']);
  });
});
