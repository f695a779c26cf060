/**
 * `hermes-aip host` draining with work in flight: an action running when SIGTERM arrives finishes
 * and is answered while new actions are refused; one that outlives the drain timeout is cancelled,
 * and the host still goes offline and exits 0.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type Envelope, signEnvelope } from '../../src/host/wire/envelope.js';
import { correlationId, messageId } from '../../src/host/wire/ids.js';
import { rfc3339 } from '../../src/host/wire/time.js';
import { tempDir } from '../cli/helpers.js';
import { type FaultServer, neverRespond, respondJson, respondStatus, startFaultServer } from '../helpers/fault-server.js';
import { type HostProcess, launchHost, waitUntil } from './host-process.js';
import { type HostUnderTest, routeFor } from './messages-support.js';

/** The coordinates the host's settings (host-env) give it, as the route helper reads them. */
const ROUTED_HOST = { pinned: { instanceId: 'cinst_hermes_acme', replicaId: 'crepl_hermes_acme_1', versionId: 'cver_hermes_1' } } as HostUnderTest;

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A host over a Hermes whose run reads are answered as each test decides (its /health always 200). */
async function startHost(drainTimeoutMs: number): Promise<HostProcess & { hermes: FaultServer }> {
  const hermes = await startFaultServer(respondJson(200, { status: 'ok', platform: 'hermes-agent', version: 'fault' }));
  cleanups.push(() => hermes.close());
  const folder = tempDir();
  writeFileSync(join(folder, 'hermes.key'), 'hk_drain_test_key\n', { mode: 0o600 });
  const configPath = join(folder, 'endpoints.json');
  writeFileSync(configPath, JSON.stringify({ endpoints: [{ id: 'local', baseUrl: hermes.url, apiKeyFile: 'hermes.key', tenantId: 'tenant-acme' }] }));
  return { ...(await launchHost(configPath, { DRAIN_TIMEOUT_MS: String(drainTimeoutMs) })), hermes };
}

/** A run_status action for `runId`, routed and signed as a reference runtime sends it. */
function statusAction(host: HostProcess, runId: string): string {
  const register = host.stub.records.find((record) => record.operation === 'register')!;
  const actionId = `act_${messageId().slice(4)}`;
  const capabilityId = 'cap:hermes_agent:local:run_status';
  const envelope: Envelope = {
    aip_version: '1.0',
    message_type: 'aip.core.v1.action',
    message_id: messageId(),
    sent_at: rfc3339(Date.now()),
    body: { action: { id: actionId, capability_id: capabilityId, input: { run_id: runId } } },
    correlation_id: correlationId(),
    to: { id: 'agent:hermes_agent:connector', kind: 'agent' },
    security: {
      connector_route: { ...routeFor(ROUTED_HOST, actionId, capabilityId), manifest_digest: register.payload['manifest_digest'] },
      trust_domain: 'connectors.test',
    },
  };
  return signEnvelope(envelope, host.env.gatewayKey, { id: 'service:getaip:server', kind: 'service', trust_domain: 'connectors.test' }).text;
}

async function post(host: HostProcess, text: string): Promise<{ status: number; body: Record<string, any> }> {
  const response = await fetch(`${host.base}/aip/v1/messages`, { method: 'POST', body: text, headers: { 'content-type': 'application/json' } });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
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
