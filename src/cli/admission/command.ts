/**
 * `hermes-aip admission`: builds the signed `aip.connector-admission/v1` package an AIP deployment admits the host's
 * image with (`getaip connector registry apply --package … --trust-policy …`), from the evidence beside the image;
 * `hermes-aip admission sign-image` signs the image digest. Refuses (exit 3, nothing written) unless all seven evidence
 * families hold.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { isDidKey } from '../../host/wire/keys.js';
import { wireJson } from '../../host/wire/json.js';
import { fileErrorText, HELP_OPTION, integerOption, parseCommand } from '../args.js';
import { CliError, EXIT, UsageError } from '../errors.js';
import { ADMISSION_HELP, ADMISSION_SIGN_IMAGE_HELP } from '../help.js';
import { type Coordinates, loadCoordinates } from './coordinates.js';
import { type EvidenceContext, judge, SEVERITIES, type Severity, type Verdict } from './evidence.js';
import { EVIDENCE_FAMILIES, type EvidenceFamily, SIGNER_ROLES } from './families.js';
import { signImage } from './image-signature.js';
import { type Document, readBytes, readDocument } from './inputs.js';
import { OversizeError, type ServedManifest, servedManifest, signedPackage, trustPolicyTemplate } from './package.js';
import { keyOf, loadSigners, type Signers } from './signers.js';

const SECRET_SOURCES = 'signing seeds come only from the owner-only files the --signers file names (or --seed-file for sign-image)';
const DIGEST = /^sha256:[0-9a-f]{64}$/;
const HOUR_MS = 3600_000;

export async function admissionCommand(args: string[]): Promise<number> {
  if (args[0] === 'sign-image') return signImageCommand(args.slice(1));
  const { values } = parseCommand(
    'admission',
    args,
    (argv) =>
      parseArgs({
        args: argv,
        strict: true,
        options: {
          coordinates: { type: 'string' },
          manifest: { type: 'string' },
          signers: { type: 'string' },
          image: { type: 'string' },
          'image-digest': { type: 'string' },
          sbom: { type: 'string' },
          provenance: { type: 'string' },
          'image-signature': { type: 'string' },
          'image-signer': { type: 'string' },
          conformance: { type: 'string' },
          audit: { type: 'string' },
          'audit-level': { type: 'string' },
          'license-policy': { type: 'string' },
          'revocation-list': { type: 'string' },
          'valid-hours': { type: 'string' },
          out: { type: 'string' },
          'trust-policy-out': { type: 'string' },
          help: HELP_OPTION,
        },
      }),
    SECRET_SOURCES,
  );
  if (values.help) {
    process.stdout.write(ADMISSION_HELP);
    return EXIT.ok;
  }
  const out = required(values.out, 'out');
  const coordinates = loadCoordinates(required(values.coordinates, 'coordinates'));
  const manifest = servedManifest(readDocument(required(values.manifest, 'manifest'), '--manifest'));
  const signers = loadSigners(required(values.signers, 'signers'));
  const validMs = (integerOption(values['valid-hours'], 'valid-hours', 1, 720) ?? 24) * HOUR_MS;
  const imageDir = values.image ?? 'build/image';
  const artifactDigest = imageDigest(values['image-digest'], imageDir);
  const now = Date.now();
  const context: EvidenceContext = {
    artifactDigest,
    version: coordinates.version.version,
    now,
    imageSignature: optionalDocument(values['image-signature'], '--image-signature'),
    imageSigner: imageSigner(values['image-signer']),
    sbom: optionalDocument(values.sbom, '--sbom', join(imageDir, 'sbom.cdx.json')),
    provenance: optionalDocument(values.provenance, '--provenance', join(imageDir, 'provenance.intoto.json')),
    conformance: optionalDocument(values.conformance, '--conformance'),
    audit: optionalDocument(values.audit, '--audit'),
    auditLevel: auditLevel(values['audit-level']),
    licensePolicy: optionalDocument(values['license-policy'], '--license-policy'),
    revocationList: optionalDocument(values['revocation-list'], '--revocation-list'),
    signerDids: [...SIGNER_ROLES.map((role) => signers[role].key.did), ...(values['image-signer'] === undefined ? [] : [values['image-signer']])],
  };
  const documents = judgeAll(context);
  const signed = packageOrRefuse(() => signedPackage({ coordinates, manifest, artifactDigest, documents, signers, issuedAt: now, expiresAt: now + validMs }));
  writeOutput(out, '--out', `${wireJson(signed)}\n`);
  if (values['trust-policy-out'] !== undefined) {
    writeOutput(
      values['trust-policy-out'],
      '--trust-policy-out',
      `${JSON.stringify(trustPolicyTemplate(signers, coordinates.connectorType.owner), null, 2)}\n`,
    );
  }
  report(coordinates, manifest, artifactDigest, signers, out);
  return EXIT.ok;
}

function required(value: string | undefined, name: string): string {
  if (value === undefined || value === '') throw new UsageError(`admission: --${name} is required (see hermes-aip admission --help)`);
  return value;
}

function imageDigest(given: string | undefined, imageDir: string): string {
  const digest = given ?? readBytes(join(imageDir, 'digest'), '--image (its digest file; or give --image-digest)', 1024).bytes.toString('utf8').trim();
  if (!DIGEST.test(digest)) throw new UsageError('--image-digest: must be sha256: and 64 lowercase hex digits (the image manifest digest)');
  return digest;
}

function imageSigner(did: string | undefined): string | undefined {
  if (did !== undefined && !isDidKey(did)) throw new UsageError('--image-signer: must be an Ed25519 did:key');
  return did;
}

function auditLevel(level: string | undefined): Severity {
  if (level === undefined) return 'low';
  if (!(SEVERITIES as readonly string[]).includes(level)) throw new UsageError(`--audit-level: must be one of ${SEVERITIES.join(', ')}`);
  return level as Severity;
}

/** A given file must be readable JSON (else a usage error); a default file that is absent is evidence missing. */
function optionalDocument(path: string | undefined, what: string, fallback?: string): Document | undefined {
  if (path !== undefined) return readDocument(path, what);
  return fallback !== undefined && existsSync(fallback) ? readDocument(fallback, `${what} (from --image)`) : undefined;
}

/** Every family's document, or a refusal listing each family that is missing or failed. */
function judgeAll(context: EvidenceContext): Record<EvidenceFamily, unknown> {
  const verdicts: Verdict[] = EVIDENCE_FAMILIES.map((family) => judge(family, context));
  for (const verdict of verdicts) {
    process.stdout.write(`  ${'refused' in verdict ? 'REFUSED' : 'ok     '} ${verdict.family}: ${'refused' in verdict ? verdict.refused : verdict.summary}\n`);
  }
  const refused = verdicts.filter((verdict) => 'refused' in verdict).map((verdict) => verdict.family);
  if (refused.length > 0) {
    throw new CliError(`admission refused: no verified or passed statement for ${refused.join(', ')}; nothing was signed`, EXIT.refused);
  }
  return Object.fromEntries(verdicts.map((verdict) => [verdict.family, 'document' in verdict ? verdict.document : undefined])) as Record<
    EvidenceFamily,
    unknown
  >;
}

function packageOrRefuse<T>(build: () => T): T {
  try {
    return build();
  } catch (error) {
    if (error instanceof OversizeError) throw new CliError(`admission refused: ${error.message}; nothing was written`, EXIT.refused);
    throw error;
  }
}

function writeOutput(path: string, what: string, content: string): void {
  try {
    writeFileSync(path, content);
  } catch (error) {
    throw new UsageError(`${what}: cannot write the file: ${fileErrorText(error)}`);
  }
}

function report(coordinates: Coordinates, manifest: ServedManifest, artifactDigest: string, signers: Signers, out: string): void {
  const lines = [
    `Admission package ${coordinates.packageId} revision ${coordinates.revision}: ${out}`,
    `  image    ${artifactDigest}`,
    `  manifest ${manifest.digest} (${manifest.support.size} capabilities)`,
    `  ${coordinates.instances.length} instance(s), ${coordinates.replicas.length} replica(s), 7 evidence statements`,
    ...SIGNER_ROLES.map((role) => `  signer ${role.padEnd(13)} ${signers[role].key.did}`),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

async function signImageCommand(args: string[]): Promise<number> {
  const { values } = parseCommand(
    'admission sign-image',
    args,
    (argv) =>
      parseArgs({
        args: argv,
        strict: true,
        options: { 'seed-file': { type: 'string' }, image: { type: 'string' }, 'image-digest': { type: 'string' }, out: { type: 'string' }, help: HELP_OPTION },
      }),
    SECRET_SOURCES,
  );
  if (values.help) {
    process.stdout.write(ADMISSION_SIGN_IMAGE_HELP);
    return EXIT.ok;
  }
  const out = required(values.out, 'out');
  const key = keyOf(required(values['seed-file'], 'seed-file'), '--seed-file');
  const digest = imageDigest(values['image-digest'], values.image ?? 'build/image');
  writeOutput(out, '--out', `${JSON.stringify(signImage(digest, key), null, 2)}\n`);
  process.stdout.write(`Signed ${digest} as ${key.did}: ${out}\n`);
  return EXIT.ok;
}
