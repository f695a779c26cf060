/** The lease: registration payload, heartbeat fences, loss and recovery, drain then offline, and a control plane that misbehaves. */
import { Buffer } from 'node:buffer';
import { pino } from 'pino';
import type { Dispatcher } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { createControlClient, firstHeartbeatDelay, LeaseKeeper, registrationPayload } from '../../src/host/lease.js';
import { HostStatus } from '../../src/host/metrics.js';
import { outboundAgent } from '../../src/host/outbound.js';
import { loadHostSettings } from '../../src/host/settings.js';
import { signingKeyFromSeed } from '../../src/host/wire/keys.js';
import { fromTimeArray } from '../../src/host/wire/time.js';
import { createPrivateCa } from '../helpers/private-ca.js';
import { type ControlStub, startControlStub } from './control-stub.js';
import { hostEnv, prefixed } from './host-env.js';
import { waitUntil } from './host-process.js';

const HEARTBEAT_MS = 100;
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Rig {
  stub: ControlStub;
  status: HostStatus;
  keeper: LeaseKeeper;
  did: string;
  ready: { value: boolean; probes: number; throws: boolean };
}

async function rig(options: { leaseTtlMs?: number; random?: number; tls?: { key: string; cert: string }; dispatcher?: Dispatcher } = {}): Promise<Rig> {
  const env = hostEnv({ HEARTBEAT_MS: String(HEARTBEAT_MS) });
  const key = signingKeyFromSeed(Buffer.from(env.seedHex, 'hex'));
  const stub = await startControlStub(key.did, options.tls);
  cleanups.push(() => stub.close());
  stub.leaseTtlMs = options.leaseTtlMs ?? 30_000;
  const settings = loadHostSettings(prefixed({ ...env.settings, CONTROL_ENDPOINT: stub.url, CONTROL_DID: stub.did }));
  const control = createControlClient({
    endpoint: stub.url,
    controlDid: stub.did,
    key,
    timeoutMs: 2_000,
    ...(options.dispatcher === undefined ? {} : { dispatcher: options.dispatcher }),
  });
  const status = new HostStatus();
  const ready = { value: true, probes: 0, throws: false };
  const keeper = new LeaseKeeper({
    control,
    status,
    replicaId: settings.replicaId,
    heartbeatMs: HEARTBEAT_MS,
    registration: () =>
      registrationPayload(
        settings,
        { principal: { id: 'agent:hermes_agent:connector', kind: 'agent' }, did: key.did, manifestDigest: `sha256:${'a'.repeat(64)}`, capabilityCount: 5 },
        Date.now(),
      ),
    probe: async () => {
      ready.probes += 1;
      if (ready.throws) throw new Error('probe failed');
      status.connectorReady = ready.value;
      return ready.value;
    },
    logger: pino({ level: 'silent' }),
    random: () => options.random ?? 0.5,
  });
  cleanups.push(() => keeper.stop());
  return { stub, status, keeper, did: key.did, ready };
}

const ofOperation = (stub: ControlStub, operation: string) => stub.records.filter((record) => record.operation === operation);

describe('registration', () => {
  it('sends the payload the reference host builds, signed by the host, and takes the lease', async () => {
    const { stub, status, keeper, did } = await rig();
    const before = Date.now();
    expect(await keeper.register()).toBe(true);
    const [register] = ofOperation(stub, 'register');
    expect(register?.verified).toBe(true);
    const { replica, ...rest } = register!.payload;
    expect(Object.keys(replica)).toEqual([
      'id',
      'instance_id',
      'version_id',
      'endpoint',
      'peer_principal_id',
      'peer_principal_kind',
      'peer_did',
      'trust_domain',
      'transport_profile',
      'topology',
      'status',
      'lease_expires_at',
      'capacity',
      'active_assignments',
      'health_revision',
    ]);
    expect(replica).toMatchObject({
      id: 'crepl_hermes_acme_1',
      instance_id: 'cinst_hermes_acme',
      version_id: 'cver_hermes_1',
      endpoint: 'http://127.0.0.1:8081/aip/v1/messages',
      peer_principal_id: 'agent:hermes_agent:connector',
      peer_principal_kind: 'agent',
      peer_did: did,
      trust_domain: 'connectors.test',
      transport_profile: 'aip.native.http.v1',
      topology: { region: 'global', zone: 'default', capacity_class: 'standard' },
      status: 'ready',
      capacity: 32,
      active_assignments: 0,
      health_revision: 0,
    });
    expect(replica.lease_expires_at).toHaveLength(9);
    expect(fromTimeArray(replica.lease_expires_at)).toBeGreaterThanOrEqual(before + 30_000);
    expect(rest).toEqual({
      manifest_digest: `sha256:${'a'.repeat(64)}`,
      artifact_digest: `sha256:${'1'.repeat(64)}`,
      tenant_id: 'tenant-acme',
      config_revision: 1,
      secret_provider_ref: 'secret://tenant-acme/hermes',
      capability_count: 5,
    });
    expect(register!.text).not.toContain('last_control_request');
    expect(status.lease.sequence).toBe(register!.granted);
    expect(status.leaseValid()).toBe(true);
  });

  it('jitters the first heartbeat to 0.75–1.25 × the interval', () => {
    expect(firstHeartbeatDelay(10_000, 0)).toBe(7_500);
    expect(firstHeartbeatDelay(10_000, 0.999_999)).toBe(12_500);
    expect(firstHeartbeatDelay(10_000, 0.5)).toBe(10_000);
  });
});

describe('heartbeats', () => {
  it('fences each heartbeat with the last granted sequence and reports in-flight work and readiness', async () => {
    const { stub, status, keeper } = await rig();
    await keeper.register();
    status.inFlight = 3;
    keeper.start();
    await waitUntil(() => ofOperation(stub, 'heartbeat').length >= 3, 'three heartbeats');
    await keeper.stop();
    const [register] = ofOperation(stub, 'register');
    const heartbeats = ofOperation(stub, 'heartbeat');
    expect(heartbeats[0]!.payload).toEqual({ replica_id: 'crepl_hermes_acme_1', previous_sequence: register!.granted, in_flight: 3, connector_ready: true });
    expect(heartbeats[1]!.payload['previous_sequence']).toBe(heartbeats[0]!.granted);
    expect(heartbeats[2]!.payload['previous_sequence']).toBe(heartbeats[1]!.granted);
    expect(new Set(heartbeats.map((heartbeat) => heartbeat.requestId)).size).toBe(heartbeats.length);
    expect(heartbeats.every((heartbeat) => heartbeat.verified)).toBe(true);
  });

  it('loses the lease when renewals are refused, then recovers with a fresh registration', async () => {
    const { stub, status, keeper } = await rig({ leaseTtlMs: 400 });
    await keeper.register();
    keeper.start();
    stub.answer = (record) => (record.operation === 'register' || record.operation === 'heartbeat' ? 'reject' : 'grant');
    await waitUntil(() => !status.leaseValid(), 'the lease to expire');
    await waitUntil(() => ofOperation(stub, 'register').length >= 3, 'two refused recoveries');
    stub.answer = () => 'grant';
    await waitUntil(() => status.leaseValid(), 'the lease to come back');
    expect(status.counter('lease_recoveries_total')).toBe(1);
    expect(status.counter('lease_recovery_attempts_total')).toBeGreaterThanOrEqual(3);
    expect(status.counter('heartbeat_failures_total')).toBeGreaterThanOrEqual(2);
    const registers = ofOperation(stub, 'register');
    const refused = registers.filter((record) => record.granted === undefined);
    expect(refused.length).toBeGreaterThanOrEqual(2);
    expect(new Set(registers.map((record) => record.requestId)).size).toBe(registers.length);
    expect(status.lease.sequence).toBe(registers.at(-1)!.granted);
  });

  it('resends the same registration after a transport failure', async () => {
    const { stub, status, keeper } = await rig();
    stub.answer = (record) => (record.operation === 'register' && ofOperation(stub, 'register').length <= 3 ? 'drop' : 'grant');
    expect(await keeper.register()).toBe(false);
    expect(ofOperation(stub, 'register')).toHaveLength(2);
    keeper.start();
    await waitUntil(() => status.leaseValid(), 'the lease');
    const registers = ofOperation(stub, 'register');
    expect(registers.length).toBeGreaterThanOrEqual(4);
    expect(new Set(registers.map((record) => record.requestId)).size).toBe(1);
    expect(new Set(registers.map((record) => JSON.stringify(record.payload))).size).toBe(1);
  });

  it('resends the same registration after an answer with another outcome than a lease (the reference: a control-plane error, not a refusal)', async () => {
    const { stub, status, keeper } = await rig();
    stub.answer = (record) => (record.operation === 'register' && ofOperation(stub, 'register').length <= 2 ? 'offline-outcome' : 'grant');
    expect(await keeper.register()).toBe(false);
    keeper.start();
    await waitUntil(() => status.leaseValid(), 'the lease');
    const registers = ofOperation(stub, 'register');
    expect(registers.length).toBeGreaterThanOrEqual(3);
    expect(new Set(registers.map((record) => record.requestId)).size).toBe(1);
  });

  it('does not re-register while the connector is not ready, and does once it is', async () => {
    const { stub, status, keeper, ready } = await rig({ leaseTtlMs: 400 });
    await keeper.register();
    ready.value = false;
    stub.answer = (record) => (record.operation === 'heartbeat' ? 'expired-lease' : 'grant');
    keeper.start();
    await waitUntil(() => !status.leaseValid(), 'the lease to lapse');
    const probesBefore = ready.probes;
    await waitUntil(() => ready.probes >= probesBefore + 3, 'three more ticks');
    expect(ofOperation(stub, 'register')).toHaveLength(1);
    expect(status.counter('lease_recovery_attempts_total')).toBe(0);
    ready.value = true;
    await waitUntil(() => status.leaseValid(), 'the lease after readiness returns');
    expect(ofOperation(stub, 'register')).toHaveLength(2);
  });
  it('keeps ticking when a readiness probe throws', async () => {
    const { stub, status, keeper, ready } = await rig();
    await keeper.register();
    ready.throws = true;
    keeper.start();
    await waitUntil(() => status.counter('heartbeat_failures_total') >= 2, 'two failed ticks');
    expect(ofOperation(stub, 'heartbeat').every((record) => record.payload['connector_ready'] === false || record === ofOperation(stub, 'heartbeat')[0])).toBe(
      true,
    );
    ready.throws = false;
    await waitUntil(
      () => ofOperation(stub, 'heartbeat').some((record, index) => index > 0 && record.payload['connector_ready'] === true),
      'a ready heartbeat after the probe recovers',
    );
  });
});

describe('a misbehaving control plane', () => {
  for (const answer of ['garbage', 'wrong-key', 'unsigned', 'unavailable'] as const) {
    it(`never grants readiness on a ${answer} answer`, async () => {
      const { stub, status, keeper } = await rig();
      stub.answer = () => answer;
      expect(await keeper.register()).toBe(false);
      expect(status.leaseValid()).toBe(false);
      expect(status.ready()).toBe(false);
      keeper.start();
      await waitUntil(() => status.counter('lease_recovery_attempts_total') >= 2, 'two recovery attempts');
      expect(status.leaseValid()).toBe(false);
      const ids = new Set(ofOperation(stub, 'register').map((record) => record.requestId));
      // An untrusted answer is a refusal (fresh request id next time); garbage or a retryable refusal is not.
      if (answer === 'wrong-key' || answer === 'unsigned') expect(ids.size).toBeGreaterThan(1);
      else expect(ids.size).toBe(1);
    });
  }

  it('survives a control plane that is down', async () => {
    const { stub, status, keeper } = await rig();
    await stub.close();
    expect(await keeper.register()).toBe(false);
    expect(status.leaseValid()).toBe(false);
  });
});

describe('an https control plane under a private CA (AIP_CONNECTOR_HOST_TLS_CA_FILE)', () => {
  it('registers through the host’s outbound client trusting the private root; without that root it gets no lease', async () => {
    const ca = createPrivateCa();
    cleanups.push(async () => ca.remove());
    const tls = ca.leaf('IP:127.0.0.1');
    for (const [root, granted] of [
      [ca.caPem, true],
      [undefined, false],
    ] as const) {
      const outbound = outboundAgent(root);
      cleanups.push(() => outbound.close());
      const { stub, status, keeper } = await rig({ tls, dispatcher: outbound });
      expect(await keeper.register()).toBe(granted);
      expect(status.leaseValid()).toBe(granted);
      expect(ofOperation(stub, 'register').filter((record) => record.verified)).toHaveLength(granted ? 1 : 0);
    }
  });
});

describe('drain and offline', () => {
  it('drains fenced with the current lease, then goes offline fenced with the drain', async () => {
    const { stub, status, keeper } = await rig();
    await keeper.register();
    keeper.start();
    await waitUntil(() => ofOperation(stub, 'heartbeat').length >= 1, 'a heartbeat');
    status.draining = true;
    await keeper.drain();
    const heartbeats = ofOperation(stub, 'heartbeat');
    const [drain] = ofOperation(stub, 'drain');
    expect(drain!.payload).toEqual({ replica_id: 'crepl_hermes_acme_1', previous_sequence: heartbeats.at(-1)!.granted });
    await keeper.offline();
    const [offline] = ofOperation(stub, 'offline');
    expect(offline!.payload).toEqual({ replica_id: 'crepl_hermes_acme_1', previous_sequence: drain!.granted });
    expect(ofOperation(stub, 'heartbeat')).toHaveLength(heartbeats.length);
  });
});
