/**
 * The `aip.connector-admission/v1` package, built field by field as the reference's serde types write it (declaration
 * order, `OffsetDateTime` as 9-integer arrays, every `Vec` present), each evidence statement and the package signed as
 * `sign_value` does: Ed25519 over the canonical JSON, standard base64.
 */
import { canonicalJson } from '../../host/wire/json.js';
import { digestJson, manifestDigest, NATIVE_HTTP_PROFILE } from '../../host/wire/manifest.js';
import { reserialize } from '../../host/wire/reference-types.js';
import { timeArray } from '../../host/wire/time.js';
import { operationSupport } from '../../contract/registry.js';
import { schemaCatalog } from '../../contract/schemas.js';
import { AIP_VERSION, CAPABILITY_PREFIX } from '../../internal/package-info.js';
import { OPERATION_NAMES, type ImplementationSupport, type OperationName } from '../../types.js';
import { UsageError } from '../errors.js';
import type { Coordinates } from './coordinates.js';
import { ADMISSION_PACKAGE_SCHEMA, EVIDENCE_FAMILIES, EVIDENCE_STATEMENT_SCHEMA, type EvidenceFamily, REQUIRED_OUTCOME } from './families.js';
import { type Document, MAX_DOCUMENT_BYTES, MAX_PACKAGE_BYTES } from './inputs.js';
import type { Signer, Signers } from './signers.js';

/** The manifest a replica serves at GET /aip/v1/manifest, its digest, and what the connector implements for each capability. */
export interface ServedManifest {
  readonly tree: unknown;
  readonly digest: string;
  readonly agent: { id: string; kind: string; trust_domain: string };
  readonly support: ReadonlyMap<string, ImplementationSupport>;
}

export function servedManifest(document: Document): ServedManifest {
  const typed = reserialize.manifest(document.tree);
  if (!typed.ok) throw new UsageError(`--manifest: not a manifest the reference reads: ${typed.reason}`);
  if (canonicalJson(typed.tree) !== canonicalJson(document.tree)) {
    throw new UsageError('--manifest: not the manifest a host serves (a host serves it exactly as the reference re-serialises it; fetch GET /aip/v1/manifest)');
  }
  const manifest = typed.value as Record<string, unknown>;
  const agent = manifest['agent'] as Record<string, unknown>;
  if (agent['did'] !== undefined || typeof agent['trust_domain'] !== 'string' || !(manifest['profiles'] as unknown[]).includes(NATIVE_HTTP_PROFILE)) {
    throw new UsageError(`--manifest: not bound to a host (agent with a trust domain and no DID, profile ${NATIVE_HTTP_PROFILE})`);
  }
  const capabilities = Array.isArray(manifest['capabilities']) ? manifest['capabilities'] : [];
  if (capabilities.length === 0) throw new UsageError('--manifest: declares no capability');
  const ids = capabilities.map((capability) => String((capability as { id: unknown }).id));
  const support = new Map(ids.map((id) => [id, supportOf(id)]));
  return {
    tree: typed.tree,
    digest: manifestDigest(typed.tree as object),
    agent: { id: String(agent['id']), kind: String(agent['kind']), trust_domain: agent['trust_domain'] },
    support,
  };
}

/** What this connector implements for one of its capabilities; a capability of another connector is refused. */
function supportOf(capabilityId: string): ImplementationSupport {
  const operation = capabilityId.slice(capabilityId.lastIndexOf(':') + 1);
  if (!capabilityId.startsWith(CAPABILITY_PREFIX) || !(OPERATION_NAMES as readonly string[]).includes(operation)) {
    throw new UsageError("--manifest: a capability is not one of this connector's (not a manifest `hermes-aip host` serves)");
  }
  return operationSupport(schemaCatalog().operations[operation as OperationName].declaration);
}

export interface PackageInputs {
  readonly coordinates: Coordinates;
  readonly manifest: ServedManifest;
  readonly artifactDigest: string;
  readonly documents: Readonly<Record<EvidenceFamily, unknown>>;
  readonly signers: Signers;
  readonly issuedAt: number;
  readonly expiresAt: number;
}

/** A package that could never be admitted under the reference's default limits. */
export class OversizeError extends Error {}

export function signedPackage(inputs: PackageInputs): Record<string, unknown> {
  const pkg = admissionPackage(inputs);
  const signer = inputs.signers.package;
  const signed = { package: pkg, signer_did: signer.key.did, signer_identity: signer.identity, signature: signer.key.sign(canonicalJson(pkg)) };
  const bytes = Buffer.byteLength(canonicalJson(signed));
  if (bytes > MAX_PACKAGE_BYTES)
    throw new OversizeError(`the package is ${bytes} bytes of canonical JSON; the reference's default limit is ${MAX_PACKAGE_BYTES}`);
  return signed;
}

function admissionPackage(inputs: PackageInputs): Record<string, unknown> {
  const { coordinates, manifest, artifactDigest } = inputs;
  const { connectorType, version } = coordinates;
  return {
    schema_version: ADMISSION_PACKAGE_SCHEMA,
    package_id: coordinates.packageId,
    revision: coordinates.revision,
    issued_at: timeArray(inputs.issuedAt),
    expires_at: timeArray(inputs.expiresAt),
    connector_type: { id: connectorType.id, name: connectorType.name, owner: connectorType.owner, enabled: true },
    version: {
      id: version.id,
      connector_type_id: connectorType.id,
      version: version.version,
      status: version.status,
      manifest: manifest.tree,
      manifest_digest: manifest.digest,
      artifact_digest: artifactDigest,
      implementation_support: Object.fromEntries(manifest.support),
      supported_aip_versions: [AIP_VERSION],
      sdk_version_requirement: version.sdkVersionRequirement,
    },
    admission_policies: [],
    instances: coordinates.instances.map((instance) => ({
      id: instance.id,
      connector_type_id: connectorType.id,
      version_id: version.id,
      tenant_id: instance.tenant_id,
      config_revision: instance.config_revision,
      secret_provider_ref: instance.secret_provider_ref,
      status: 'enabled',
    })),
    replicas: coordinates.replicas.map((replica) => ({
      id: replica.id,
      instance_id: replica.instance_id,
      version_id: version.id,
      endpoint: replica.endpoint,
      peer_principal_id: manifest.agent.id,
      peer_principal_kind: manifest.agent.kind,
      peer_did: replica.peer_did,
      trust_domain: manifest.agent.trust_domain,
      transport_profile: NATIVE_HTTP_PROFILE,
      topology: replica.topology,
      // Pre-provisioned: offline and empty until the host registers and takes its lease.
      status: 'offline',
      lease_expires_at: timeArray(inputs.issuedAt),
      capacity: replica.capacity,
      active_assignments: 0,
      health_revision: 0,
    })),
    bindings: coordinates.instances.flatMap((instance) =>
      [...manifest.support.keys()].map((capabilityId) => ({
        tenant_id: instance.tenant_id,
        capability_id: capabilityId,
        instance_id: instance.id,
        priority: 0,
        policy_revision: 1,
        credential_revision_ref: instance.credential_revision_ref,
        quota_policy_ref: null,
        enabled: true,
      })),
    ),
    evidence: Object.fromEntries(EVIDENCE_FAMILIES.map((family) => [family, signedEvidence(family, inputs.documents[family], inputs.signers[family], inputs)])),
  };
}

function signedEvidence(family: EvidenceFamily, document: unknown, signer: Signer, inputs: PackageInputs): Record<string, unknown> {
  const bytes = Buffer.byteLength(canonicalJson(document));
  if (bytes > MAX_DOCUMENT_BYTES) throw new OversizeError(`the ${family} document is ${bytes} bytes; the reference's default limit is ${MAX_DOCUMENT_BYTES}`);
  const statement = {
    schema_version: EVIDENCE_STATEMENT_SCHEMA,
    kind: family,
    artifact_digest: inputs.artifactDigest,
    manifest_digest: inputs.manifest.digest,
    document_digest: digestJson(document),
    signer_identity: signer.identity,
    issued_at: timeArray(inputs.issuedAt),
    expires_at: timeArray(inputs.expiresAt),
    outcome: REQUIRED_OUTCOME[family],
  };
  return { statement, document, signer_did: signer.key.did, signature: signer.key.sign(canonicalJson(statement)) };
}

/** A starting point for the deployment's `AdmissionTrustPolicy`: these signers, the reference's default limits. */
export function trustPolicyTemplate(signers: Signers, owner: string): Record<string, unknown> {
  return {
    trusted_package_signer_dids: [signers.package.key.did],
    trusted_evidence_signer_dids: Object.fromEntries(EVIDENCE_FAMILIES.map((family) => [family, [signers[family].key.did]])),
    require_distinct_signers: true,
    required_owner: owner,
    max_package_bytes: MAX_PACKAGE_BYTES,
    max_evidence_document_bytes: MAX_DOCUMENT_BYTES,
    max_instances: 10_000,
    max_replicas: 50_000,
    max_bindings: 100_000,
    max_clock_skew_seconds: 300,
  };
}
