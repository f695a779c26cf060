/** The seven evidence families of `aip.connector-evidence/v1` and the one outcome each must have to admit (aip-connector-admission). */
export const EVIDENCE_FAMILIES = ['oci_signature', 'sbom', 'provenance', 'conformance', 'vulnerability', 'license', 'revocation'] as const;
export type EvidenceFamily = (typeof EVIDENCE_FAMILIES)[number];
export type Outcome = 'verified' | 'passed';

export const REQUIRED_OUTCOME: Readonly<Record<EvidenceFamily, Outcome>> = {
  oci_signature: 'verified',
  sbom: 'verified',
  provenance: 'verified',
  conformance: 'passed',
  vulnerability: 'passed',
  license: 'passed',
  revocation: 'passed',
};

export const ADMISSION_PACKAGE_SCHEMA = 'aip.connector-admission/v1';
export const EVIDENCE_STATEMENT_SCHEMA = 'aip.connector-evidence/v1';

/** Who signs what: the package's release authority, and one signer per family. */
export const SIGNER_ROLES = ['package', ...EVIDENCE_FAMILIES] as const;
export type SignerRole = (typeof SIGNER_ROLES)[number];
