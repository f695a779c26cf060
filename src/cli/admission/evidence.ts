/**
 * The seven evidence checks. Each either returns the document its statement will embed and the outcome the family
 * needs (`verified` for oci_signature, sbom and provenance; `passed` for the rest), or refuses with the reason: missing
 * evidence and evidence that failed are never signed as verified or passed.
 */
import { rfc3339 } from '../../host/wire/time.js';
import { digestJson } from '../../host/wire/manifest.js';
import { CONFORMANCE_SCHEMA_ID } from '../../conformance/artifact.js';
import { sha256 } from '../identities.js';
import type { EvidenceFamily } from './families.js';
import { imageSignatureProblem } from './image-signature.js';
import type { Document } from './inputs.js';
import { isRecord } from './inputs.js';
import { licenseViolations } from './license.js';

export const SEVERITIES = ['info', 'low', 'moderate', 'high', 'critical'] as const;
export type Severity = (typeof SEVERITIES)[number];

/** An audit or a revocation list older than this is stale: it says nothing about today's advisories or revocations. */
export const MAX_OBSERVATION_AGE_MS = 24 * 3600_000;
/** The reference's clock skew: an observation dated further ahead is refused. */
const CLOCK_SKEW_MS = 300_000;

export interface EvidenceContext {
  readonly artifactDigest: string;
  readonly version: string;
  readonly now: number;
  readonly imageSignature: Document | undefined;
  readonly imageSigner: string | undefined;
  readonly sbom: Document | undefined;
  readonly provenance: Document | undefined;
  readonly conformance: Document | undefined;
  readonly audit: Document | undefined;
  readonly auditLevel: Severity;
  readonly licensePolicy: Document | undefined;
  readonly revocationList: Document | undefined;
  /** Every DID this package relies on: the signers' and the image signer's. */
  readonly signerDids: readonly string[];
}

export type Verdict = { family: EvidenceFamily; document: unknown; summary: string } | { family: EvidenceFamily; refused: string };

class Refusal extends Error {}

function refuse(reason: string): never {
  throw new Refusal(reason);
}

function present(document: Document | undefined, missing: string): Document {
  return document ?? refuse(missing);
}

const get = (value: unknown, ...path: string[]): unknown => path.reduce<unknown>((node, key) => (isRecord(node) ? node[key] : undefined), value);

const digestHex = (artifactDigest: string): string => artifactDigest.slice('sha256:'.length);

type Check = (context: EvidenceContext) => { document: unknown; summary: string };

const CHECKS: Readonly<Record<EvidenceFamily, Check>> = {
  oci_signature: checkImageSignature,
  sbom: checkSbom,
  provenance: checkProvenance,
  conformance: checkConformance,
  vulnerability: checkVulnerabilities,
  license: checkLicenses,
  revocation: checkRevocation,
};

export function judge(family: EvidenceFamily, context: EvidenceContext): Verdict {
  try {
    return { family, ...CHECKS[family](context) };
  } catch (error) {
    if (error instanceof Refusal) return { family, refused: error.message };
    throw error;
  }
}

function checkImageSignature(context: EvidenceContext): { document: unknown; summary: string } {
  const unsigned =
    'the image is unsigned: no signature over its digest was verified (sign it with `hermes-aip admission sign-image`, then give --image-signature and --image-signer)';
  const signature = present(context.imageSignature, unsigned);
  if (context.imageSigner === undefined) refuse('--image-signer is needed to verify --image-signature: no trusted image key was named');
  const problem = imageSignatureProblem(signature.value, context.artifactDigest, context.imageSigner);
  if (problem !== undefined) refuse(problem);
  return { document: signature.tree, summary: `signature by ${context.imageSigner} over the image digest verified` };
}

function checkSbom(context: EvidenceContext): { document: unknown; summary: string } {
  const { value, tree } = present(context.sbom, 'no SBOM (--sbom, or sbom.cdx.json in --image)');
  if (get(value, 'bomFormat') !== 'CycloneDX' || typeof get(value, 'specVersion') !== 'string') refuse('the SBOM is not a CycloneDX JSON document');
  const hashes = get(value, 'metadata', 'component', 'hashes');
  const subject = Array.isArray(hashes) && hashes.some((hash) => get(hash, 'alg') === 'SHA-256' && get(hash, 'content') === digestHex(context.artifactDigest));
  if (!subject) refuse('the SBOM describes another image: its metadata.component has no SHA-256 hash equal to the image digest');
  const components = get(value, 'components');
  if (!Array.isArray(components) || components.length === 0) refuse('the SBOM lists no components');
  return { document: tree, summary: `CycloneDX ${String(get(value, 'specVersion'))}, ${components.length} components, subject the image digest` };
}

function checkProvenance(context: EvidenceContext): { document: unknown; summary: string } {
  const { value, tree } = present(context.provenance, 'no provenance (--provenance, or provenance.intoto.json in --image)');
  if (get(value, '_type') !== 'https://in-toto.io/Statement/v1' || get(value, 'predicateType') !== 'https://slsa.dev/provenance/v1') {
    refuse('the provenance is not an in-toto Statement v1 with a SLSA Provenance v1 predicate');
  }
  const subjects = get(value, 'subject');
  const subject = Array.isArray(subjects) ? subjects.find((item) => get(item, 'digest', 'sha256') === digestHex(context.artifactDigest)) : undefined;
  if (subject === undefined) refuse('the provenance is about another image: no subject has the image digest');
  if (!String(get(subject, 'name')).endsWith(`:${context.version}`)) refuse(`the provenance subject is not version ${context.version}`);
  const commit = provenanceCommit(value) ?? refuse('the provenance names no source commit');
  const sbom = context.sbom;
  const byproducts = get(value, 'predicate', 'runDetails', 'byproducts');
  const sbomHex = sbom === undefined ? undefined : sha256(sbom.bytes);
  if (!Array.isArray(byproducts) || !byproducts.some((item) => get(item, 'digest', 'sha256') === sbomHex)) {
    refuse('the provenance does not name this SBOM (by its SHA-256) among the build byproducts');
  }
  return { document: tree, summary: `SLSA v1, subject the image digest, commit ${commit}, this SBOM a byproduct` };
}

function provenanceCommit(provenance: unknown): string | undefined {
  const commit = get(provenance, 'predicate', 'buildDefinition', 'externalParameters', 'source', 'digest', 'gitCommit');
  return typeof commit === 'string' && /^[0-9a-f]{40,64}$/.test(commit) ? commit : undefined;
}

function checkConformance(context: EvidenceContext): { document: unknown; summary: string } {
  const { value, tree } = present(context.conformance, 'no conformance report (--conformance: the conformance.json `hermes-aip conformance --out` writes)');
  if (get(value, '$schema') !== CONFORMANCE_SCHEMA_ID) refuse('--conformance is not a hermes-aip conformance report');
  const endpoints = get(value, 'endpoints');
  const failed = get(value, 'summary', 'failed');
  if (get(value, 'result') !== 'passed' || failed !== 0 || !Array.isArray(endpoints) || endpoints.length === 0) {
    refuse(`the conformance report did not pass (result ${String(get(value, 'result'))}, ${String(failed)} failed check(s))`);
  }
  if (get(value, 'identities', 'connector', 'version') !== context.version) refuse(`the conformance report is about another version than ${context.version}`);
  const commit = context.provenance === undefined ? undefined : provenanceCommit(context.provenance.value);
  if (commit === undefined) refuse('the conformance report cannot be bound to the image: the provenance names no commit');
  if (get(value, 'identities', 'connector', 'git_revision') !== commit || get(value, 'identities', 'connector', 'git_dirty') !== false) {
    refuse(`the conformance report was not made from the image's commit ${commit} (clean)`);
  }
  return { document: tree, summary: `passed on ${endpoints.length} endpoint(s), commit ${commit}` };
}

function checkVulnerabilities(context: EvidenceContext): { document: unknown; summary: string } {
  const audit = present(
    context.audit,
    'no audit report (--audit: the output of `npm audit --omit=dev --json` at this commit): no vulnerability statement is made without one',
  );
  const counts = get(audit.value, 'metadata', 'vulnerabilities');
  if (get(audit.value, 'auditReportVersion') !== 2 || !isRecord(counts) || !SEVERITIES.every((level) => Number.isSafeInteger(counts[level]))) {
    refuse('--audit is not an npm audit report (auditReportVersion 2 with metadata.vulnerabilities counts)');
  }
  const observedAt = observationTime(audit.modifiedMs, context.now, 'the audit report');
  const failing = SEVERITIES.slice(SEVERITIES.indexOf(context.auditLevel)).filter((level) => (counts[level] as number) > 0);
  if (failing.length > 0) {
    refuse(`the audit found vulnerabilities at or above ${context.auditLevel}: ${failing.map((level) => `${String(counts[level])} ${level}`).join(', ')}`);
  }
  const document = {
    source: 'npm audit --json (auditReportVersion 2)',
    observed_at: observedAt,
    audit_level: context.auditLevel,
    vulnerabilities: counts,
    report: audit.tree,
  };
  return { document, summary: `npm audit of ${observedAt}: none at or above ${context.auditLevel}` };
}

/** An observation's time as RFC 3339, refused when stale or from the future. */
function observationTime(ms: number, now: number, what: string): string {
  if (ms > now + CLOCK_SKEW_MS) refuse(`${what} is dated in the future`);
  if (now - ms > MAX_OBSERVATION_AGE_MS) refuse(`${what} is older than 24 hours: run it again`);
  return rfc3339(Math.floor(ms));
}

function checkLicenses(context: EvidenceContext): { document: unknown; summary: string } {
  const policy = present(context.licensePolicy, 'no license policy (--license-policy: the licenses you allow)');
  const sbom = present(context.sbom, 'no SBOM to check licenses in');
  const result = licenseViolations(sbom.value, policy.value);
  if (typeof result === 'string') refuse(result);
  if (result.violations.length > 0) {
    const shown = result.violations.slice(0, 5).map((item) => `${item.component} (${item.reason})`);
    refuse(`${result.violations.length} component(s) outside the license policy: ${shown.join('; ')}${result.violations.length > 5 ? '; …' : ''}`);
  }
  const document = { sbom_digest: digestJson(sbom.tree), policy: policy.tree, components_checked: result.checked, accepted_by_exception: result.accepted };
  return { document, summary: `${result.checked} components within the policy (${result.accepted.length} accepted by exception)` };
}

function checkRevocation(context: EvidenceContext): { document: unknown; summary: string } {
  const list = present(context.revocationList, 'no revocation list (--revocation-list): non-revocation of the image and the signers was not observed');
  const source = get(list.value, 'source');
  const checkedAt = get(list.value, 'checked_at');
  const revokedDigests = get(list.value, 'revoked_artifact_digests');
  const revokedDids = get(list.value, 'revoked_signer_dids');
  const strings = (value: unknown): value is string[] => Array.isArray(value) && value.every((item) => typeof item === 'string');
  const checkedMs = typeof checkedAt === 'string' ? Date.parse(checkedAt) : Number.NaN;
  if (typeof source !== 'string' || source === '' || Number.isNaN(checkedMs) || !strings(revokedDigests) || !strings(revokedDids)) {
    refuse('--revocation-list must hold "source", "checked_at" (RFC 3339), "revoked_artifact_digests" and "revoked_signer_dids"');
  }
  observationTime(checkedMs, context.now, 'the revocation list');
  if (revokedDigests.includes(context.artifactDigest)) refuse('the image digest is revoked');
  const revoked = context.signerDids.filter((did) => revokedDids.includes(did));
  if (revoked.length > 0) refuse(`revoked signer key(s): ${revoked.join(', ')}`);
  const document = { revocation_list: list.tree, artifact_digest: context.artifactDigest, signer_dids: [...context.signerDids] };
  return { document, summary: `neither the image nor ${context.signerDids.length} signer keys revoked (${source}, ${checkedAt as string})` };
}
