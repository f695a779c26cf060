/** The built `hermes-aip host` over a fault-server Hermes, and run_status actions signed as a reference runtime sends them. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { type Envelope, signEnvelope } from '../../src/host/wire/envelope.js';
import { correlationId, messageId } from '../../src/host/wire/ids.js';
import { rfc3339 } from '../../src/host/wire/time.js';
import { tempDir } from '../cli/helpers.js';
import { type FaultServer, respondJson, startFaultServer } from '../helpers/fault-server.js';
import { type HostProcess, launchHost } from './host-process.js';
import { type HostUnderTest, routeFor } from './messages-support.js';

/** The coordinates the host's settings (host-env) give it, as the route helper reads them. */
const ROUTED_HOST = { pinned: { instanceId: 'cinst_hermes_acme', replicaId: 'crepl_hermes_acme_1', versionId: 'cver_hermes_1' } } as HostUnderTest;

const hermesServers: FaultServer[] = [];
afterEach(async () => {
  await Promise.all(hermesServers.splice(0).map((hermes) => hermes.close()));
});

export type FaultHermesHost = HostProcess & { hermes: FaultServer };

/** A host over a Hermes whose run reads are answered as each test decides (its /health always 200). */
export async function launchHostOverFaultHermes(settings: Record<string, string>, environment: Record<string, string> = {}): Promise<FaultHermesHost> {
  const hermes = await startFaultServer(respondJson(200, { status: 'ok', platform: 'hermes-agent', version: 'fault' }));
  hermesServers.push(hermes);
  const folder = tempDir();
  writeFileSync(join(folder, 'hermes.key'), 'hk_fault_hermes_test_key\n', { mode: 0o600 });
  const configPath = join(folder, 'endpoints.json');
  writeFileSync(configPath, JSON.stringify({ endpoints: [{ id: 'local', baseUrl: hermes.url, apiKeyFile: 'hermes.key', tenantId: 'tenant-acme' }] }));
  return { ...(await launchHost(configPath, settings, () => {}, environment)), hermes };
}

/** A run_status action for `runId`, routed and signed as a reference runtime sends it. */
export function statusAction(host: HostProcess, runId: string, actionId = `act_${messageId().slice(4)}`): string {
  const register = host.stub.records.find((record) => record.operation === 'register')!;
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

export async function postMessage(host: HostProcess, text: string): Promise<{ status: number; body: Record<string, any> }> {
  const response = await fetch(`${host.base}/aip/v1/messages`, { method: 'POST', body: text, headers: { 'content-type': 'application/json' } });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}
