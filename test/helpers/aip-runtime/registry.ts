/**
 * The runtime double's registry of connector replicas, as its event ingress consults it: fed by the
 * control plane's granted registrations (identity, instance, version, manifest digest) and its leases
 * (status, expiry, sequence), and by the manifests it admitted: on each granted registration the
 * runtime reads the replica's served manifest and admits its channels under the digest it registered,
 * only when the served manifest has that digest.
 */
import type { RegisterPayload } from '../../../src/host/wire/control.js';
import { manifestDigest } from '../../../src/host/wire/manifest.js';
import type { ControlPlane, ControlRecord } from './control-plane.js';
import type { AdmittedVersion, RegisteredReplica } from './event-ingress.js';

export interface Registry {
  replica(replicaId: string): RegisteredReplica | undefined;
  /** The version of the latest granted registration, with the channels of its admitted manifest. */
  version(): AdmittedVersion | undefined;
  /** Reads and admits the manifest a granted registration names (called for every control record). */
  admit(record: ControlRecord): Promise<void>;
}

const MANIFEST_PATH = '/aip/v1/manifest';

const registrationOf = (record: ControlRecord): RegisterPayload | undefined =>
  record.operation === 'register' && record.status === 200 ? (record.request?.command.payload as RegisterPayload) : undefined;

export function createRegistry(control: Pick<ControlPlane, 'records' | 'lease'>): Registry {
  const channels = new Map<string, readonly unknown[]>();
  const latest = (replicaId?: string): RegisterPayload | undefined =>
    control.records
      .map(registrationOf)
      .filter((payload): payload is RegisterPayload => payload !== undefined && (replicaId === undefined || payload.replica.id === replicaId))
      .at(-1);

  return {
    replica(replicaId) {
      const registration = latest(replicaId);
      const lease = control.lease(replicaId);
      if (!registration || !lease) return undefined;
      const { replica } = registration;
      return {
        replicaId,
        instanceId: replica.instance_id,
        versionId: replica.version_id,
        principal: { id: replica.peer_principal_id, kind: replica.peer_principal_kind, trust_domain: replica.trust_domain },
        did: replica.peer_did,
        status: lease.status,
        leaseExpiresAt: lease.expiresAt,
        healthRevision: lease.sequence,
      };
    },
    version() {
      const registration = latest();
      if (!registration) return undefined;
      const { replica, manifest_digest: digest } = registration;
      return {
        tenantId: registration.tenant_id,
        instanceId: replica.instance_id,
        versionId: replica.version_id,
        manifestDigest: digest,
        channels: channels.get(digest) ?? [],
      };
    },
    async admit(record) {
      const registration = registrationOf(record);
      if (!registration || channels.has(registration.manifest_digest)) return;
      const response = await fetch(new URL(MANIFEST_PATH, registration.replica.endpoint)).catch(() => undefined);
      const manifest = (await response?.json().catch(() => undefined)) as { channels?: unknown[] } | undefined;
      if (manifest && manifestDigest(manifest) === registration.manifest_digest) channels.set(registration.manifest_digest, manifest.channels ?? []);
    },
  };
}
