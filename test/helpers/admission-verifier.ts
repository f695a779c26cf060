/**
 * A verifier of `aip.connector-admission/v1` packages written from the reference's rules
 * (getaip/core `aip-connector-admission::verify_admission_package`, `aip-connector-registry`): it parses the package
 * into the reference's types as serde does (unknown fields dropped, unknown evidence families refused), re-serialises
 * it, checks every signature over that canonical form, and applies the trust policy in the reference's order.
 * The discovery admission of the manifest is this project's restatement (`admissionProblems`).
 */
import { REQUIRED_OUTCOME } from '../../src/cli/admission/families.js';
import { admissionProblems } from '../../src/conformance/kit/admission.js';
import { canonicalJson, NumberLexeme, parseWire, plainJson } from '../../src/host/wire/json.js';
import { isDidKey, verifyWithDid } from '../../src/host/wire/keys.js';
import { digestJson } from '../../src/host/wire/manifest.js';
import {
  ANY,
  BOOL,
  CONNECTOR_REPLICA,
  enumOf,
  field,
  type Kind,
  MANIFEST,
  reserializeAs,
  SET,
  STRING,
  struct,
  TIME_ARRAY,
  U32,
  U64,
} from '../../src/host/wire/reference-types.js';
import { fromTimeArray } from '../../src/host/wire/time.js';
import type { AipManifest, ImplementationSupport } from '../../src/types.js';

export const EVIDENCE_KINDS = ['oci_signature', 'sbom', 'provenance', 'conformance', 'vulnerability', 'license', 'revocation'] as const;
export type EvidenceKind = (typeof EVIDENCE_KINDS)[number];

export interface AdmissionTrustPolicy {
  trusted_package_signer_dids: string[];
  trusted_evidence_signer_dids: Partial<Record<EvidenceKind, string[]>>;
  require_distinct_signers: boolean;
  required_owner: string | null;
  max_package_bytes: number;
  max_evidence_document_bytes: number;
  max_instances: number;
  max_replicas: number;
  max_bindings: number;
  max_clock_skew_seconds: number;
}

/** `AdmissionTrustPolicy::default()` with the given trust roots. */
export function defaultPolicy(roots: Pick<AdmissionTrustPolicy, 'trusted_package_signer_dids' | 'trusted_evidence_signer_dids'>): AdmissionTrustPolicy {
  return {
    ...roots,
    require_distinct_signers: true,
    required_owner: null,
    max_package_bytes: 16 * 1024 * 1024,
    max_evidence_document_bytes: 8 * 1024 * 1024,
    max_instances: 10_000,
    max_replicas: 50_000,
    max_bindings: 100_000,
    max_clock_skew_seconds: 300,
  };
}

export type Verification = { ok: true; packageDigest: string } | { ok: false; error: 'invalid' | 'signature' | 'evidence'; message: string };

const nullable = (name: string, kind: Kind) => field(name, kind, 'nullable');
const vecOf = (of: Kind): Kind => ({ k: 'vec', of });
const mapOf = (key: Kind, of: Kind): Kind => ({ k: 'map', key, of });
const EVIDENCE_KIND = enumOf(...EVIDENCE_KINDS);

const EVIDENCE_STATEMENT = struct(
  field('schema_version', STRING),
  field('kind', EVIDENCE_KIND),
  field('artifact_digest', STRING),
  field('manifest_digest', STRING),
  field('document_digest', STRING),
  field('signer_identity', STRING),
  field('issued_at', TIME_ARRAY),
  field('expires_at', TIME_ARRAY),
  field('outcome', enumOf('verified', 'passed', 'failed')),
);
const SIGNED_EVIDENCE = struct(field('statement', EVIDENCE_STATEMENT), field('document', ANY), field('signer_did', STRING), field('signature', STRING));
const SUPPORT = struct(
  ...['invocation', 'cancellation', 'streaming', 'retry', 'transaction', 'reconciliation', 'compensation', 'approval', 'credentials'].map((name) =>
    field(name, BOOL),
  ),
);
const VERSION_DECLARATION = struct(
  field('id', STRING),
  field('connector_type_id', STRING),
  field('version', STRING),
  field('status', enumOf('candidate', 'admitted', 'active', 'revoked')),
  field('manifest', MANIFEST),
  field('manifest_digest', STRING),
  field('artifact_digest', STRING),
  field('implementation_support', mapOf(STRING, SUPPORT)),
  field('supported_aip_versions', SET),
  field('sdk_version_requirement', STRING),
);
const ADMISSION_POLICY = struct(
  field('policy_ref', STRING),
  field('revision', U64),
  field('enabled', BOOL),
  ...[
    'max_global_in_flight',
    'max_tenant_in_flight',
    'max_connector_type_in_flight',
    'max_instance_in_flight',
    'max_binding_in_flight',
    'max_tenant_retry_in_flight',
    'circuit_failure_threshold',
  ].map((name) => field(name, U32)),
  field('circuit_open_ms', U64),
);
const INSTANCE = struct(
  field('id', STRING),
  field('connector_type_id', STRING),
  field('version_id', STRING),
  field('tenant_id', STRING),
  field('config_revision', U64),
  field('secret_provider_ref', STRING),
  field('status', enumOf('enabled', 'disabled')),
);
const BINDING = struct(
  field('tenant_id', STRING),
  field('capability_id', STRING),
  field('instance_id', STRING),
  field('priority', U32),
  field('policy_revision', U64),
  nullable('credential_revision_ref', STRING),
  nullable('quota_policy_ref', STRING),
  field('enabled', BOOL),
);
const PACKAGE = struct(
  field('schema_version', STRING),
  field('package_id', STRING),
  field('revision', U64),
  field('issued_at', TIME_ARRAY),
  field('expires_at', TIME_ARRAY),
  field('connector_type', struct(field('id', STRING), field('name', STRING), field('owner', STRING), field('enabled', BOOL))),
  field('version', VERSION_DECLARATION),
  field('admission_policies', vecOf(ADMISSION_POLICY), { default: [] }),
  field('instances', vecOf(INSTANCE), { default: [] }),
  field('replicas', vecOf(CONNECTOR_REPLICA), { default: [] }),
  field('bindings', vecOf(BINDING), { default: [] }),
  field('evidence', mapOf(EVIDENCE_KIND, SIGNED_EVIDENCE)),
);
const SIGNED_PACKAGE = struct(field('package', PACKAGE), field('signer_did', STRING), field('signer_identity', STRING), field('signature', STRING));

class Refusal extends Error {
  constructor(
    readonly error: 'invalid' | 'signature' | 'evidence',
    message: string,
  ) {
    super(message);
  }
}

const invalid = (message: string): never => {
  throw new Refusal('invalid', message);
};
const signatureFailure = (message: string): never => {
  throw new Refusal('signature', message);
};
const evidenceFailure = (message: string): never => {
  throw new Refusal('evidence', message);
};

// biome-ignore lint/suspicious/noExplicitAny: the re-serialised tree is checked field by field, as the typed Rust structs are.
type Tree = any;

export function verifyAdmissionPackage(text: string, policy: AdmissionTrustPolicy, nowMs: number): Verification {
  try {
    return { ok: true, packageDigest: verify(text, policy, nowMs) };
  } catch (error) {
    if (error instanceof Refusal) return { ok: false, error: error.error, message: error.message };
    throw error;
  }
}

function verify(text: string, policy: AdmissionTrustPolicy, nowMs: number): string {
  validatePolicy(policy);
  const parsed = parseWire(text);
  if ('error' in parsed) return invalid(parsed.error);
  const typed = reserializeAs(SIGNED_PACKAGE, parsed.tree);
  if (!typed.ok) return invalid(typed.reason);
  const signed: Tree = typed.tree;
  const signedBytes = Buffer.byteLength(canonicalJson(signed));
  if (signedBytes > policy.max_package_bytes) invalid(`canonical package is ${signedBytes} bytes; limit is ${policy.max_package_bytes}`);
  requireTrustedSigner(signed.signer_did, policy.trusted_package_signer_dids, 'admission package');
  if (!label(signed.signer_identity, 512)) invalid('package signer identity must contain 1 to 512 bytes');
  if (!verifyWithDid(signed.signer_did, canonicalJson(signed.package), signed.signature)) signatureFailure('admission package signature does not verify');
  const pkg: Tree = signed.package;
  if (pkg.schema_version !== 'aip.connector-admission/v1') invalid(`unsupported package schema \`${pkg.schema_version}\``);
  if (!label(pkg.package_id, 256)) invalid('package id must contain 1 to 256 printable bytes');
  if (integer(pkg.revision) === 0) invalid('package revision must be greater than zero');
  validateTimeWindow('admission package', pkg.issued_at, pkg.expires_at, nowMs, policy.max_clock_skew_seconds);
  if (pkg.instances.length > policy.max_instances || pkg.replicas.length > policy.max_replicas || pkg.bindings.length > policy.max_bindings) {
    invalid('package exceeds configured instance, replica, or binding limits');
  }
  if (policy.required_owner !== null && pkg.connector_type.owner !== policy.required_owner) invalid('connector owner does not match required owner');
  if (pkg.version.connector_type_id !== pkg.connector_type.id) invalid('version connector type does not match package connector type');
  if (pkg.version.status === 'candidate' || pkg.version.status === 'revoked') invalid('admission package version must request admitted or active status');
  if (digestJson(pkg.version.manifest) !== pkg.version.manifest_digest) invalid('declared manifest digest does not match canonical manifest');
  validateTopology(pkg);
  verifyEvidenceSet(pkg, policy, nowMs, signed.signer_did);
  validateConnectorVersion(pkg);
  return digestJson(signed);
}

function validatePolicy(policy: AdmissionTrustPolicy): void {
  const limits = [policy.max_package_bytes, policy.max_evidence_document_bytes, policy.max_instances, policy.max_replicas, policy.max_bindings];
  if (policy.trusted_package_signer_dids.length === 0 || limits.includes(0) || policy.max_clock_skew_seconds < 0 || policy.max_clock_skew_seconds > 3600) {
    invalid('admission trust policy requires trust roots and non-zero bounded limits');
  }
  for (const kind of EVIDENCE_KINDS) {
    const roots = policy.trusted_evidence_signer_dids[kind] ?? [];
    if (roots.length === 0) invalid(`admission trust policy requires at least one \`${kind}\` evidence signer`);
  }
  if (![...policy.trusted_package_signer_dids, ...Object.values(policy.trusted_evidence_signer_dids).flat()].every(isDidKey))
    invalid('a trust root is not a did:key');
}

function validateTopology(pkg: Tree): void {
  for (const instance of pkg.instances) {
    if (instance.connector_type_id !== pkg.connector_type.id || instance.version_id !== pkg.version.id) {
      invalid(`instance \`${instance.id}\` is not bound to the package type and version`);
    }
  }
  const tenants = new Map<string, string>(pkg.instances.map((instance: Tree) => [instance.id, instance.tenant_id]));
  for (const replica of pkg.replicas) {
    if (
      replica.version_id !== pkg.version.id ||
      !tenants.has(replica.instance_id) ||
      replica.status !== 'offline' ||
      integer(replica.active_assignments) !== 0
    ) {
      invalid(`replica \`${replica.id}\` must be offline, empty, and bound to a package instance/version`);
    }
  }
  for (const binding of pkg.bindings) {
    const tenant = tenants.get(binding.instance_id);
    if (tenant === undefined) invalid(`binding references unknown package instance \`${binding.instance_id}\``);
    if (tenant !== binding.tenant_id) invalid('binding tenant does not own its package instance');
  }
}

function verifyEvidenceSet(pkg: Tree, policy: AdmissionTrustPolicy, nowMs: number, packageSigner: string): void {
  const observed = new Set([packageSigner]);
  for (const kind of EVIDENCE_KINDS) {
    const evidence: Tree = pkg.evidence[kind] ?? evidenceFailure(`mandatory \`${kind}\` evidence is missing`);
    const { statement } = evidence;
    if (
      statement.schema_version !== 'aip.connector-evidence/v1' ||
      statement.kind !== kind ||
      statement.artifact_digest !== pkg.version.artifact_digest ||
      statement.manifest_digest !== pkg.version.manifest_digest
    ) {
      evidenceFailure(`\`${kind}\` statement does not match its package subject`);
    }
    requireTrustedSigner(evidence.signer_did, policy.trusted_evidence_signer_dids[kind] ?? [], `${kind} evidence`);
    if (policy.require_distinct_signers) {
      if (observed.has(evidence.signer_did)) signatureFailure(`\`${kind}\` evidence reuses a signing identity while distinct signers are required`);
      observed.add(evidence.signer_did);
    }
    if (!label(statement.signer_identity, 512)) evidenceFailure(`\`${kind}\` signer identity must contain 1 to 512 bytes`);
    validateTimeWindow('evidence statement', statement.issued_at, statement.expires_at, nowMs, policy.max_clock_skew_seconds);
    if (Buffer.byteLength(canonicalJson(evidence.document)) > policy.max_evidence_document_bytes)
      evidenceFailure(`\`${kind}\` document exceeds the configured byte limit`);
    if (digestJson(evidence.document) !== statement.document_digest) evidenceFailure(`\`${kind}\` document digest does not match its statement`);
    if (!verifyWithDid(evidence.signer_did, canonicalJson(statement), evidence.signature)) signatureFailure(`\`${kind}\` statement signature does not verify`);
    if (statement.outcome !== REQUIRED_OUTCOME[kind]) evidenceFailure(`\`${kind}\` outcome did not satisfy admission policy`);
  }
  if (Object.keys(pkg.evidence).length !== EVIDENCE_KINDS.length) evidenceFailure('package contains an unsupported evidence family');
}

/** `validate_connector_version` and `validate_artifact_attestation`, as far as the package declares them. */
function validateConnectorVersion(pkg: Tree): void {
  const version = pkg.version;
  for (const digest of [version.manifest_digest, version.artifact_digest]) {
    if (typeof digest !== 'string' || !/^sha256:[0-9a-f]{64}$/.test(digest)) invalid('a digest is not sha256:<64 hex>');
  }
  if (!version.supported_aip_versions.includes('1.0')) invalid('artifact does not declare compatibility with AIP 1.0');
  if (!label(version.sdk_version_requirement, 256)) invalid('SDK version requirement is empty');
  const support = version.implementation_support as Record<string, ImplementationSupport>;
  const manifest = plainJson(version.manifest) as unknown as AipManifest;
  const unclaimed = manifest.capabilities.filter((capability) => support[capability.id]?.invocation !== true);
  if (unclaimed.length > 0) invalid(`no implementation claim for ${unclaimed.map((capability) => capability.id).join(', ')}`);
  const problems = admissionProblems(manifest, (id) => support[id] as ImplementationSupport);
  if (problems.length > 0) invalid(`manifest admission: ${problems.join('; ')}`);
}

function requireTrustedSigner(did: string, trusted: readonly string[], role: string): void {
  if (!trusted.includes(did)) signatureFailure(`${role} signer \`${did}\` is not trusted by admission policy`);
  if (!isDidKey(did)) signatureFailure(`${role} signer is not an Ed25519 did:key`);
}

function validateTimeWindow(what: string, issuedAt: unknown, expiresAt: unknown, nowMs: number, skewSeconds: number): void {
  const issued = fromTimeArray(issuedAt) as number;
  const expires = fromTimeArray(expiresAt) as number;
  if (expires <= issued || issued > nowMs + skewSeconds * 1000 || expires <= nowMs)
    evidenceFailure(`${what} is expired, not yet valid, or has an invalid time window`);
}

/** An integer of the parsed tree (kept as its lexeme). */
function integer(value: unknown): number {
  return value instanceof NumberLexeme ? Number(value.lexeme) : Number(value);
}

function label(value: unknown, max: number): boolean {
  return typeof value === 'string' && value.trim() !== '' && Buffer.byteLength(value) <= max && !/\p{Cc}/u.test(value);
}
