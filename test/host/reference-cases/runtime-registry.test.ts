/**
 * The runtime double's registry, which its event ingress authorises against: nothing before a granted
 * registration; the replica's identity from the registration and its status, expiry and sequence from
 * the current lease; the channels of the manifest the replica serves admitted only when that manifest
 * has the digest it registered. A registry that admitted everything would let every event case pass.
 */
import { describe, expect, it } from 'vitest';
import { createHermesConnector } from '../../../src/connector.js';
import { RUN_EVENTS_CHANNEL } from '../../../src/host/event-publisher.js';
import type { RegisterPayload } from '../../../src/host/wire/control.js';
import { bindManifestToHost, manifestDigest } from '../../../src/host/wire/manifest.js';
import type { ControlRecord, ReplicaLease } from '../../helpers/aip-runtime/control-plane.js';
import { sendJson, startLoopbackServer } from '../../helpers/aip-runtime/http.js';
import { createRegistry } from '../../helpers/aip-runtime/registry.js';

const host = { id: 'agent:hermes-agent', kind: 'agent', trust_domain: 'connectors.test', did: 'did:key:zHost' };
const connector = createHermesConnector({ endpoints: [{ id: 'primary', baseUrl: 'http://127.0.0.1:1', apiKey: 'sk-primary' }] });
const served = bindManifestToHost(connector.manifest(), host, [RUN_EVENTS_CHANNEL]);

function registration(endpoint: string, manifest_digest: string, status = 200): ControlRecord {
  const payload = {
    replica: {
      id: 'crepl_1',
      instance_id: 'cinst_1',
      version_id: 'cver_1',
      endpoint,
      peer_principal_id: host.id,
      peer_principal_kind: host.kind,
      peer_did: host.did,
      trust_domain: host.trust_domain,
    },
    manifest_digest,
    tenant_id: 'tenant-acme',
  } as unknown as RegisterPayload;
  return {
    arrivedAt: 0,
    status,
    text: '',
    operation: 'register',
    problems: [],
    request: { command: { operation: 'register', payload } } as unknown as ControlRecord['request'],
  };
}

async function manifestServer(): Promise<{ endpoint: string; close(): Promise<void> }> {
  const server = await startLoopbackServer(async (request, response) =>
    request.url === '/aip/v1/manifest' ? sendJson(response, 200, JSON.stringify(served)) : sendJson(response, 404, '{}'),
  );
  return { endpoint: `${server.url}/aip/v1/messages`, close: () => server.close() };
}

describe('the runtime double’s replica registry', () => {
  it('knows a replica only from a granted registration, with its current lease', async () => {
    const records: ControlRecord[] = [];
    const leases = new Map<string, ReplicaLease>();
    const registry = createRegistry({ records, lease: (id) => leases.get(id) });
    records.push(registration('http://127.0.0.1:9/aip/v1/messages', 'sha256:refused', 403));
    leases.set('crepl_1', { sequence: 4, expiresAt: 1_000, status: 'draining' });
    expect(registry.replica('crepl_1')).toBeUndefined();
    expect(registry.version()).toBeUndefined();
    records.push(registration('http://127.0.0.1:9/aip/v1/messages', 'sha256:granted'));
    expect(registry.replica('crepl_1')).toEqual({
      replicaId: 'crepl_1',
      instanceId: 'cinst_1',
      versionId: 'cver_1',
      principal: { id: host.id, kind: host.kind, trust_domain: host.trust_domain },
      did: host.did,
      status: 'draining',
      leaseExpiresAt: 1_000,
      healthRevision: 4,
    });
    expect(registry.replica('crepl_2')).toBeUndefined();
    expect(registry.version()).toEqual({ tenantId: 'tenant-acme', instanceId: 'cinst_1', versionId: 'cver_1', manifestDigest: 'sha256:granted', channels: [] });
  });

  it('admits the served manifest’s channels under the registered digest, and not under another', async () => {
    const manifest = await manifestServer();
    try {
      const records: ControlRecord[] = [];
      const registry = createRegistry({ records, lease: () => undefined });
      const wrong = registration(manifest.endpoint, `sha256:${'0'.repeat(64)}`);
      records.push(wrong);
      await registry.admit(wrong);
      expect(registry.version()?.channels).toEqual([]);
      const right = registration(manifest.endpoint, manifestDigest(served));
      records.push(right);
      await registry.admit(right);
      expect(registry.version()?.channels).toEqual([RUN_EVENTS_CHANNEL]);
    } finally {
      await manifest.close();
    }
  });
});
