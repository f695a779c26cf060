/**
 * `hermes-aip host` draining with work in flight: an action running when SIGTERM arrives finishes
 * and is answered while new actions are refused; one that outlives the drain timeout is cancelled,
 * and the host still goes offline and exits 0.
 */
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type Envelope, signEnvelope } from '../../src/host/wire/envelope.js';
import { correlationId, messageId } from '../../src/host/wire/ids.js';
import { rfc3339 } from '../../src/host/wire/time.js';
import { finished, spawnCli, tempDir, waitForOutput } from '../cli/helpers.js';
import { type FaultServer, neverRespond, respondJson, respondStatus, startFaultServer } from '../helpers/fault-server.js';
import { type ControlStub, startControlStub } from './control-stub.js';
import { type HostEnv, hostEnv, prefixed } from './host-env.js';
import { writeFileSync } from 'node:fs';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function waitUntil(condition: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

interface RunningHost {
  base: string;
  env: HostEnv;
  stub: ControlStub;
  hermes: FaultServer;
  child: ReturnType<typeof spawnCli>;
  exit: ReturnType<typeof finished>;
}

/** A host over a Hermes whose run reads are answered as each test decides (/health always 200). */
async function startHost(drainTimeoutMs: number): Promise<RunningHost> {
  const hermes = await startFaultServer(respondJson(200, { status: 'ok', platform: 'hermes-agent', version: 'fault' }));
  cleanups.push(() => hermes.close());
  const folder = tempDir();
  writeFileSync(join(folder, 'hermes.key'), 'hk_drain_test_key\n', { mode: 0o600 });
  const configPath = join(folder, 'endpoints.json');
  writeFileSync(configPath, JSON.stringify({ endpoints: [{ id: 'local', baseUrl: hermes.url, apiKeyFile: 'hermes.key', tenantId: 'tenant-acme' }] }));
  const env = hostEnv();
  const stub = await startControlStub(env.did);
  cleanups.push(() => stub.close());
  const port = await freePort();
  const settings = {
    ...env.settings,
    BIND: `127.0.0.1:${port}`,
    PUBLIC_ENDPOINT: `http://127.0.0.1:${port}/aip/v1/messages`,
    CONTROL_ENDPOINT: stub.url,
    CONTROL_DID: stub.did,
    HEARTBEAT_MS: '200',
    DRAIN_TIMEOUT_MS: String(drainTimeoutMs),
  };
  const child = spawnCli(['host', '--config', configPath], { env: { ...prefixed(settings), HERMES_LEDGER: `sqlite:${join(env.folder, 'ledger.sqlite')}` } });
  const exit = finished(child, ['host'], 40_000);
  await waitForOutput(child.stderr, 'AIP connector host listening');
  return { base: `http://127.0.0.1:${port}`, env, stub, hermes, child, exit };
}

/** A run_status action for `runId`, routed and signed as a reference runtime sends it. */
function statusAction(host: RunningHost, runId: string): string {
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
      connector_route: {
        action_id: actionId,
        capability_id: capabilityId,
        tenant_id: 'tenant-acme',
        instance_id: 'cinst_hermes_acme',
        replica_id: 'crepl_hermes_acme_1',
        version_id: 'cver_hermes_1',
        manifest_digest: register.payload['manifest_digest'],
        catalog_revision: 1,
        binding_policy_revision: 1,
        credential_revision_ref: null,
        quota_policy_ref: null,
        replica_health_revision: 1,
        fence_token: `route_${actionId.slice(4)}`,
        original_mode: null,
      },
      trust_domain: 'connectors.test',
    },
  };
  return signEnvelope(envelope, host.env.gatewayKey, { id: 'service:getaip:server', kind: 'service', trust_domain: 'connectors.test' }).text;
}

async function post(host: RunningHost, text: string): Promise<{ status: number; body: Record<string, any> }> {
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
