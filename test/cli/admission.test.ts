import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/host/wire/json.js';
import type { SigningKey } from '../../src/host/wire/keys.js';
import { fromTimeArray } from '../../src/host/wire/time.js';
import { type AdmissionTrustPolicy, defaultPolicy, EVIDENCE_KINDS, verifyAdmissionPackage } from '../helpers/admission-verifier.js';
import { type Fixture, admissionFixture, audit, ROLES } from './admission-fixture.js';
import { runCli } from './helpers.js';

// biome-ignore lint/suspicious/noExplicitAny: packages are edited field by field to make each refusal.
type Signed = any;

let fixture: Fixture;
let packageText: string;
let policy: AdmissionTrustPolicy;

beforeAll(async () => {
  fixture = await admissionFixture();
  const signed = await runCli([
    'admission',
    'sign-image',
    '--seed-file',
    join(fixture.folder, 'image.seed'),
    '--image',
    join(fixture.folder, 'image'),
    '--out',
    join(fixture.folder, 'image.sig.json'),
  ]);
  expect(signed.code, signed.stderr).toBe(0);
  const out = join(fixture.folder, 'package.json');
  const built = await runCli(['admission', ...fixture.args, '--out', out, '--trust-policy-out', join(fixture.folder, 'policy.json')]);
  expect(built.code, `${built.stdout}\n${built.stderr}`).toBe(0);
  packageText = readFileSync(out, 'utf8');
  policy = JSON.parse(readFileSync(join(fixture.folder, 'policy.json'), 'utf8')) as AdmissionTrustPolicy;
}, 120_000);

const now = (signed: Signed) => fromTimeArray(signed.package.issued_at) as number;
const fresh = (): Signed => JSON.parse(packageText);
const resignPackage = (signed: Signed, key: SigningKey = fixture.keys.package): string => {
  signed.signer_did = key.did;
  signed.signature = key.sign(canonicalJson(signed.package));
  return JSON.stringify(signed);
};
const resignStatement = (signed: Signed, kind: string, key: SigningKey): void => {
  const evidence = signed.package.evidence[kind];
  evidence.signer_did = key.did;
  evidence.signature = key.sign(canonicalJson(evidence.statement));
};
const verify = (text: string, at: number, trust: AdmissionTrustPolicy = policy) => verifyAdmissionPackage(text, trust, at);

describe('hermes-aip admission: the package a reference-rule verifier admits', () => {
  it('is accepted under the trust policy it names and under the reference default with the same roots', () => {
    const signed = fresh();
    expect(verify(packageText, now(signed))).toMatchObject({ ok: true });
    const roots = { trusted_package_signer_dids: policy.trusted_package_signer_dids, trusted_evidence_signer_dids: policy.trusted_evidence_signer_dids };
    expect(verify(packageText, now(signed) + 3600_000, defaultPolicy(roots))).toMatchObject({ ok: true });
  });

  it('binds the image digest, the served manifest, every capability to the tenant and both replicas, each statement by its own signer', () => {
    const { package: pkg } = fresh();
    expect(pkg.version.artifact_digest).toBe(fixture.digest);
    expect(pkg.version.manifest_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(pkg.bindings).toHaveLength(pkg.version.manifest.capabilities.length);
    expect(pkg.replicas.map((replica: Signed) => [replica.id, replica.status, replica.peer_principal_id])).toEqual([
      ['crepl_acme_1', 'offline', pkg.version.manifest.agent.id],
      ['crepl_acme_2', 'offline', pkg.version.manifest.agent.id],
    ]);
    expect(new Set(EVIDENCE_KINDS.map((kind) => pkg.evidence[kind].signer_did)).size).toBe(7);
    expect(EVIDENCE_KINDS.map((kind) => pkg.evidence[kind].signer_did)).toEqual(EVIDENCE_KINDS.map((kind) => fixture.keys[kind].did));
    expect(pkg.evidence.vulnerability.document).toMatchObject({ source: expect.stringContaining('npm audit'), observed_at: expect.any(String) });
  });

  it('holds no seed: neither the package nor the policy contains one', () => {
    for (const role of [...ROLES, 'image'] as const) {
      const seed = readFileSync(join(fixture.folder, `${role}.seed`), 'utf8').trim();
      expect(packageText).not.toContain(seed);
    }
  });
});

describe('the reference-rule verifier refuses', () => {
  it('a wrong artifact digest', () => {
    const signed = fresh();
    signed.package.version.artifact_digest = `sha256:${'0'.repeat(64)}`;
    expect(verify(resignPackage(signed), now(signed))).toMatchObject({
      ok: false,
      error: 'evidence',
      message: expect.stringContaining('does not match its package subject'),
    });
  });

  it('a wrong manifest digest', () => {
    const signed = fresh();
    signed.package.version.manifest_digest = `sha256:${'1'.repeat(64)}`;
    expect(verify(resignPackage(signed), now(signed))).toMatchObject({ ok: false, error: 'invalid', message: expect.stringContaining('manifest digest') });
  });

  it('a package that has expired, and one issued beyond the 300 s clock skew, but not one within it', () => {
    const signed = fresh();
    const expires = fromTimeArray(signed.package.expires_at) as number;
    expect(verify(packageText, expires + 1000)).toMatchObject({ ok: false, error: 'evidence', message: expect.stringContaining('expired') });
    expect(verify(packageText, now(signed) - 301_000)).toMatchObject({ ok: false, error: 'evidence', message: expect.stringContaining('not yet valid') });
    expect(verify(packageText, now(signed) - 299_000)).toMatchObject({ ok: true });
  });

  it('the same signer for two families, even when the policy trusts it for both', () => {
    const signed = fresh();
    resignStatement(signed, 'license', fixture.keys.sbom);
    const trust = { ...policy, trusted_evidence_signer_dids: { ...policy.trusted_evidence_signer_dids, license: [fixture.keys.sbom.did] } };
    expect(verify(resignPackage(signed), now(signed), trust)).toMatchObject({
      ok: false,
      error: 'signature',
      message: expect.stringContaining('distinct signers'),
    });
  });

  it('a tampered statement', () => {
    const signed = fresh();
    signed.package.evidence.conformance.statement.signer_identity = 'someone-else@operator.test';
    expect(verify(resignPackage(signed), now(signed))).toMatchObject({
      ok: false,
      error: 'signature',
      message: expect.stringContaining('`conformance` statement signature'),
    });
  });

  it('a tampered document', () => {
    const signed = fresh();
    signed.package.evidence.sbom.document.components.pop();
    expect(verify(resignPackage(signed), now(signed))).toMatchObject({ ok: false, error: 'evidence', message: expect.stringContaining('document digest') });
  });

  it('a tampered package', () => {
    const signed = fresh();
    signed.package.replicas[0].endpoint = 'https://evil.test/aip/v1/messages';
    expect(verify(JSON.stringify(signed), now(signed))).toMatchObject({ ok: false, error: 'signature', message: expect.stringContaining('package signature') });
  });

  it('an unknown evidence family', () => {
    const signed = fresh();
    signed.package.evidence.malware_scan = signed.package.evidence.sbom;
    expect(verify(resignPackage(signed), now(signed))).toMatchObject({ ok: false, error: 'invalid', message: expect.stringContaining('unknown variant') });
  });

  it('a package or a document over the size limits', () => {
    const signed = fresh();
    expect(verify(packageText, now(signed), { ...policy, max_package_bytes: Buffer.byteLength(canonicalJson(signed)) - 1 })).toMatchObject({
      ok: false,
      error: 'invalid',
      message: expect.stringContaining('limit'),
    });
    const sbomBytes = Buffer.byteLength(canonicalJson(signed.package.evidence.sbom.document));
    expect(verify(packageText, now(signed), { ...policy, max_evidence_document_bytes: sbomBytes - 1 })).toMatchObject({
      ok: false,
      error: 'evidence',
      message: expect.stringContaining('byte limit'),
    });
  });

  it('missing evidence', () => {
    const signed = fresh();
    delete signed.package.evidence.revocation;
    expect(verify(resignPackage(signed), now(signed))).toMatchObject({
      ok: false,
      error: 'evidence',
      message: expect.stringContaining('`revocation` evidence is missing'),
    });
  });

  it('failed evidence, signed as failed by its own trusted signer', () => {
    const signed = fresh();
    signed.package.evidence.vulnerability.statement.outcome = 'failed';
    resignStatement(signed, 'vulnerability', fixture.keys.vulnerability);
    expect(verify(resignPackage(signed), now(signed))).toMatchObject({ ok: false, error: 'evidence', message: expect.stringContaining('outcome') });
  });

  it('a package signer the policy does not trust', () => {
    const signed = fresh();
    expect(verify(resignPackage(signed, fixture.keys.image), now(signed))).toMatchObject({
      ok: false,
      error: 'signature',
      message: expect.stringContaining('not trusted'),
    });
  });
});

describe('hermes-aip admission refuses to sign what it did not verify', () => {
  const refusal = async (replace: Record<string, string | null>, family: string) => {
    const args = [...fixture.args];
    for (const [option, value] of Object.entries(replace)) {
      const at = args.indexOf(option);
      if (value === null) args.splice(at, 2);
      else if (at === -1) args.push(option, value);
      else args[at + 1] = value;
    }
    const out = join(fixture.folder, `refused-${family}.json`);
    const run = await runCli(['admission', ...args, '--out', out]);
    expect(run.code, run.stderr).toBe(3);
    expect(run.stdout).toMatch(new RegExp(`REFUSED ${family}:`));
    expect(run.stderr).toContain(`no verified or passed statement for`);
    expect(existsSync(out)).toBe(false);
    return run;
  };

  it('an unsigned image: no oci_signature', async () => {
    await refusal({ '--image-signature': null }, 'oci_signature');
  });

  it('no audit report: no vulnerability statement', async () => {
    const run = await refusal({ '--audit': null }, 'vulnerability');
    expect(run.stdout).toContain('no vulnerability statement is made');
  });

  it('an audit that found a high vulnerability', async () => {
    await refusal({ '--audit': fixture.write('audit-high.json', audit({ high: 1 })) }, 'vulnerability');
  });

  it('a conformance report that failed', async () => {
    const report = JSON.parse(readFileSync(join(fixture.folder, 'conformance.json'), 'utf8'));
    await refusal(
      { '--conformance': fixture.write('conformance-failed.json', { ...report, result: 'failed', summary: { ...report.summary, failed: 1 } }) },
      'conformance',
    );
  });

  it('a component outside the license policy', async () => {
    await refusal({ '--license-policy': fixture.write('license-narrow.json', { licenses: ['MIT'] }) }, 'license');
  });

  it('an SBOM and provenance about another image', async () => {
    await refusal({ '--image-digest': `sha256:${'2'.repeat(64)}` }, 'sbom');
  });

  it('a revoked signer key', async () => {
    const list = { source: 'feed', checked_at: new Date().toISOString(), revoked_artifact_digests: [], revoked_signer_dids: [fixture.keys.license.did] };
    await refusal({ '--revocation-list': fixture.write('revoked.json', list) }, 'revocation');
  });

  it('a seed file others can read, without echoing it', async () => {
    const seed = readFileSync(join(fixture.folder, 'sbom.seed'), 'utf8').trim();
    fixture.write('loose.seed', `${seed}\n`, 0o644);
    const signers = JSON.parse(readFileSync(join(fixture.folder, 'signers.json'), 'utf8'));
    const path = fixture.write('signers-loose.json', { ...signers, sbom: { ...signers.sbom, seed_file: 'loose.seed' } });
    const run = await runCli(['admission', ...fixture.args.map((arg) => (arg.endsWith('signers.json') ? path : arg)), '--out', join(fixture.folder, 'x.json')]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('owner-only');
    expect(run.stderr + run.stdout).not.toContain(seed);
  });

  it('one key for two roles', async () => {
    const signers = JSON.parse(readFileSync(join(fixture.folder, 'signers.json'), 'utf8'));
    const path = fixture.write('signers-shared.json', { ...signers, license: { ...signers.license, seed_file: 'sbom.seed' } });
    const run = await runCli(['admission', ...fixture.args.map((arg) => (arg.endsWith('signers.json') ? path : arg)), '--out', join(fixture.folder, 'x.json')]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('sbom and license use the same key');
  });

  it('a bad value, without echoing it', async () => {
    const run = await runCli(['admission', ...fixture.args, '--image-digest', 'sk_live_not_a_digest', '--out', join(fixture.folder, 'x.json')]);
    expect(run.code).toBe(2);
    expect(run.stderr).not.toContain('sk_live_not_a_digest');
  });
});
