/**
 * A host's AIP event target against the runtime double's event ingress: one registered replica
 * under a live lease, the admitted version declaring the run-events channel, and journaled Hermes
 * events as the outbox hands them over (the lifecycle capture's, float timestamps included).
 */
import { readFileSync } from 'node:fs';
import { afterEach } from 'vitest';
import type { HermesSseEvent } from '../../src/contract/aip.js';
import { createAipEventTarget, type Publishing, RUN_EVENTS_CHANNEL, RUN_EVENTS_CHANNEL_ID } from '../../src/host/event-publisher.js';
import type { ConnectorEventRoute } from '../../src/host/provider-events.js';
import type { Principal } from '../../src/host/wire/envelope.js';
import type { DeliveryTarget, OutboxEvent } from '../../src/outbox/types.js';
import { freshKey, gatewayParty, INSTANCE_ID, replicaId, TENANT_ID, TRUST_DOMAIN, VERSION_ID } from '../helpers/aip-runtime/deployment.js';
import { type EventIngress, type RegisteredReplica, startEventIngress } from '../helpers/aip-runtime/event-ingress.js';

export const gateway = gatewayParty();
export const hostKey = freshKey();
export const hostPrincipal: Principal = { id: 'agent:hermes-agent', kind: 'agent', trust_domain: TRUST_DOMAIN };
export const MANIFEST_DIGEST = `sha256:${'ab'.repeat(32)}`;
export const REPLICA_ID = replicaId(1);
const LEASE_SEQUENCE = 3;

export function route(overrides: Partial<ConnectorEventRoute> = {}): ConnectorEventRoute {
  return {
    tenant_id: TENANT_ID,
    instance_id: INSTANCE_ID,
    replica_id: REPLICA_ID,
    version_id: VERSION_ID,
    manifest_digest: MANIFEST_DIGEST,
    lease_sequence: LEASE_SEQUENCE,
    channel_id: RUN_EVENTS_CHANNEL_ID,
    ...overrides,
  };
}

export function publishingWith(overrides: Partial<ConnectorEventRoute> = {}): Publishing {
  return {
    signer: hostPrincipal,
    recipient: { id: gateway.principal.id, kind: 'service', trust_domain: TRUST_DOMAIN },
    recipientDid: gateway.key.did,
    route: route(overrides),
  };
}

const ingresses: EventIngress[] = [];
afterEach(async () => {
  await Promise.all(ingresses.splice(0).map((ingress) => ingress.close()));
});

/** The ingress, knowing the replica (live lease, health revision = the lease sequence) and the admitted version with the channel. */
export async function eventIngress(replica: Partial<RegisteredReplica> = {}): Promise<EventIngress> {
  const registered: RegisteredReplica = {
    replicaId: REPLICA_ID,
    instanceId: INSTANCE_ID,
    versionId: VERSION_ID,
    principal: hostPrincipal,
    did: hostKey.did,
    status: 'ready',
    leaseExpiresAt: Date.now() + 60_000,
    healthRevision: LEASE_SEQUENCE,
    ...replica,
  };
  const ingress = await startEventIngress({
    central: gateway,
    replica: (id) => (id === REPLICA_ID ? registered : undefined),
    version: () => ({ tenantId: TENANT_ID, instanceId: INSTANCE_ID, versionId: VERSION_ID, manifestDigest: MANIFEST_DIGEST, channels: [RUN_EVENTS_CHANNEL] }),
  });
  ingresses.push(ingress);
  return ingress;
}

export function eventTarget(endpoint: string, publishing: () => Publishing | undefined = () => publishingWith(), attemptTimeoutMs?: number): DeliveryTarget {
  return createAipEventTarget({ endpoint, instanceId: INSTANCE_ID, key: hostKey, publishing, ...(attemptTimeoutMs === undefined ? {} : { attemptTimeoutMs }) });
}

/** The Hermes events of the lifecycle capture, parsed as the connector parses SSE data. */
export function capturedEvents(): HermesSseEvent[] {
  const text = readFileSync(new URL('../../fixtures/captures/02-events-lifecycle.http', import.meta.url), 'utf8');
  return [...text.matchAll(/^data: (.*)$/gm)].map((match) => {
    const data = JSON.parse(match[1]!) as { event: string } & Record<string, unknown>;
    return { event: data.event, data };
  });
}

/** Outbox events of one run, numbered from `first`, with ids as stable as the outbox makes them. */
export function outboxEvents(events: HermesSseEvent[], runId = 'run_d1d361d6646c4f4db2bf950d124a8fc4', first = 1): OutboxEvent[] {
  return events.map((event, index) => ({
    id: `aip:${INSTANCE_ID}/${TENANT_ID}/local/${runId}/${first + index}`,
    key: { tenant_id: TENANT_ID, endpoint_id: 'local', run_id: runId },
    sequence: first + index,
    event,
  }));
}

export const never: AbortSignal = new AbortController().signal;
