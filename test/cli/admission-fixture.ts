/**
 * The evidence an operator holds when running `hermes-aip admission`: seeds for eight distinct signers and an image
 * signer (owner-only), the manifest a host serves (the host's own binding of this connector's manifest), an SBOM and
 * a provenance statement shaped as `npm run image` writes them for a given image digest, a conformance report, an npm
 * audit report, a license policy and a revocation list.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHermesConnector } from 'aip-connector-hermes-agent';
import { CONFORMANCE_SCHEMA_ID } from '../../src/conformance/artifact.js';
import { signingKeyFromSeed, type SigningKey } from '../../src/host/wire/keys.js';
import { bindManifestToHost } from '../../src/host/wire/manifest.js';

export const ROLES = ['package', 'oci_signature', 'sbom', 'provenance', 'conformance', 'vulnerability', 'license', 'revocation'] as const;
export const VERSION = '0.1.0';
const COMMIT = 'c0ffee'.padEnd(40, '0');

export interface Fixture {
  folder: string;
  digest: string;
  keys: Record<(typeof ROLES)[number] | 'image', SigningKey>;
  /** Writes a JSON file into the fixture's folder and returns its path. */
  write: (name: string, value: unknown, mode?: number) => string;
  /** The options of a complete, admissible run (without --out). */
  args: string[];
}

export async function admissionFixture(): Promise<Fixture> {
  const folder = mkdtempSync(join(tmpdir(), 'hermes-aip-admission-'));
  const write = (name: string, value: unknown, mode = 0o644): string => {
    const path = join(folder, name);
    writeFileSync(path, typeof value === 'string' ? value : JSON.stringify(value, null, 2), { mode });
    return path;
  };
  const keys = {} as Fixture['keys'];
  for (const role of [...ROLES, 'image'] as const) {
    const seed = randomBytes(32);
    keys[role] = signingKeyFromSeed(seed);
    write(`${role}.seed`, `${seed.toString('hex')}\n`, 0o600);
  }
  write('signers.json', Object.fromEntries(ROLES.map((role) => [role, { seed_file: `${role}.seed`, identity: `${role}@operator.test` }])));
  const digest = `sha256:${randomBytes(32).toString('hex')}`;
  mkdirSync(join(folder, 'image'));
  write('image/sbom.cdx.json', sbom(digest));
  const sbomHex = createHash('sha256')
    .update(JSON.stringify(sbom(digest), null, 2))
    .digest('hex');
  write('image/digest', `${digest}\n`);
  write('image/provenance.intoto.json', provenance(digest, sbomHex));
  write('manifest.json', await servedManifest());
  write('conformance.json', {
    $schema: CONFORMANCE_SCHEMA_ID,
    result: 'passed',
    identities: { connector: { package: 'aip-connector-hermes-agent', version: VERSION, git_revision: COMMIT, git_dirty: false } },
    endpoints: [{ endpoint_id: 'local', result: 'passed' }],
    summary: { endpoints: 1, checks: 13, passed: 13, failed: 0, not_applicable: 0 },
  });
  write('audit.json', audit({}));
  write('license-policy.json', { licenses: ['MIT', 'Apache-2.0', 'GPL-2+'] });
  write('revocation.json', { source: 'operator revocation feed', checked_at: new Date().toISOString(), revoked_artifact_digests: [], revoked_signer_dids: [] });
  write('coordinates.json', {
    package_id: 'hermes-aip-acme',
    revision: 1,
    connector_type: { id: 'ctype_hermes_agent', name: 'Hermes Agent', owner: 'Acme platform team' },
    version: { id: 'cver_hermes_agent_0_1_0' },
    instances: [{ id: 'cinst_acme', tenant_id: 'tenant-acme', secret_provider_ref: 'file:/run/secrets/hermes' }],
    replicas: [
      {
        id: 'crepl_acme_1',
        instance_id: 'cinst_acme',
        endpoint: 'https://hermes-1.acme.test/aip/v1/messages',
        peer_did: signingKeyFromSeed(randomBytes(32)).did,
      },
      {
        id: 'crepl_acme_2',
        instance_id: 'cinst_acme',
        endpoint: 'https://hermes-2.acme.test/aip/v1/messages',
        peer_did: signingKeyFromSeed(randomBytes(32)).did,
      },
    ],
  });
  const at = (name: string) => join(folder, name);
  const args = [
    ...['--coordinates', at('coordinates.json'), '--manifest', at('manifest.json'), '--signers', at('signers.json'), '--image', at('image')],
    ...['--conformance', at('conformance.json'), '--audit', at('audit.json'), '--license-policy', at('license-policy.json')],
    ...['--revocation-list', at('revocation.json'), '--image-signature', at('image.sig.json'), '--image-signer', keys.image.did],
  ];
  return { folder, digest, keys, write, args };
}

export function audit(counts: Partial<Record<'info' | 'low' | 'moderate' | 'high' | 'critical', number>>): unknown {
  const vulnerabilities = { info: 0, low: 0, moderate: 0, high: 0, critical: 0, ...counts };
  const total = Object.values(vulnerabilities).reduce((sum, count) => sum + count, 0);
  return { auditReportVersion: 2, vulnerabilities: {}, metadata: { vulnerabilities: { ...vulnerabilities, total }, dependencies: { prod: 40, total: 40 } } };
}

export function sbom(digest: string): unknown {
  return {
    bomFormat: 'CycloneDX',
    specVersion: '1.6',
    metadata: { component: { type: 'container', name: 'aip-connector-hermes-agent', hashes: [{ alg: 'SHA-256', content: digest.slice(7) }] } },
    components: [
      { type: 'library', name: 'pino', version: '10.4.0', purl: 'pkg:npm/pino@10.4.0', licenses: [{ license: { id: 'MIT' } }] },
      { type: 'library', name: 'dual', version: '1.0.0', purl: 'pkg:npm/dual@1.0.0', licenses: [{ expression: '(MIT OR GPL-3.0-only)' }] },
      { type: 'library', name: 'base-files', version: '13.8', purl: 'pkg:deb/debian/base-files@13.8', licenses: [{ license: { name: 'GPL-2+' } }] },
    ],
  };
}

function provenance(digest: string, sbomHex: string): unknown {
  return {
    _type: 'https://in-toto.io/Statement/v1',
    subject: [{ name: `aip-connector-hermes-agent:${VERSION}`, digest: { sha256: digest.slice(7) } }],
    predicateType: 'https://slsa.dev/provenance/v1',
    predicate: {
      buildDefinition: {
        buildType: 'https://aip-connector-hermes-agent.local/image/build-type/v1',
        externalParameters: {
          command: 'npm run image',
          source: { uri: 'pkg:npm/aip-connector-hermes-agent', digest: { gitCommit: COMMIT } },
          revision: COMMIT,
        },
      },
      runDetails: { builder: { id: 'scripts/image.sh' }, byproducts: [{ name: 'sbom.cdx.json', digest: { sha256: sbomHex } }] },
    },
  };
}

/** What `GET /aip/v1/manifest` serves: the host binds the connector's manifest to its principal (bindManifestToHost). */
async function servedManifest(): Promise<unknown> {
  const connector = createHermesConnector({ endpoints: [{ id: 'local', baseUrl: 'http://127.0.0.1:9', tenantId: 'tenant-acme' }] });
  const manifest = connector.manifest();
  await connector.close();
  const { id, kind, display_name } = manifest.agent;
  return bindManifestToHost(manifest, { id, kind, ...(display_name ? { display_name } : {}), trust_domain: 'connectors.acme.test' } as never);
}
