/**
 * The image's provenance: an in-toto Statement v1 whose subject is the image (its manifest
 * digest) and whose predicate is SLSA Provenance v1: the build command, the commit, the digests of
 * the lockfiles that fix what went in (package-lock.json, image/debian-packages.lock), the
 * build script, the Debian suite and SOURCE_DATE_EPOCH, and the SBOM made beside it. Unsigned here:
 * signing is the admission step's (issue 33 item 3).
 *
 * tsx scripts/image/provenance.ts --digest sha256:… --name N --version V --commit C --revision R --source URL
 *   --source-date-epoch S --started ISO --sbom F --debian-suite trixie --out provenance.intoto.json
 */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

export const BUILD_COMMAND = 'npm run image';
export const BUILD_TYPE = 'https://aip-connector-hermes-agent.local/image/build-type/v1';

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

function main(): void {
  const { values: v } = parseArgs({
    options: {
      digest: { type: 'string' },
      name: { type: 'string' },
      version: { type: 'string' },
      commit: { type: 'string' },
      revision: { type: 'string' },
      source: { type: 'string' },
      'source-date-epoch': { type: 'string' },
      started: { type: 'string' },
      sbom: { type: 'string' },
      'debian-suite': { type: 'string' },
      out: { type: 'string' },
    },
  });
  const required = (key: keyof typeof v): string => {
    const value = v[key];
    if (!value) throw new Error(`provenance.ts: --${key} is required`);
    return value;
  };
  const out = required('out');
  const sbom = required('sbom');
  const digest = required('digest');
  for (const key of ['name', 'version', 'commit', 'revision', 'source', 'source-date-epoch', 'started', 'debian-suite'] as const) required(key);
  const [algorithm, hex] = digest.split(':');
  if (algorithm !== 'sha256' || !/^[0-9a-f]{64}$/.test(hex ?? '')) throw new Error(`not a sha256 digest: ${v.digest}`);

  const statement = {
    _type: 'https://in-toto.io/Statement/v1',
    subject: [{ name: `${v.name}:${v.version}`, digest: { sha256: hex } }],
    predicateType: 'https://slsa.dev/provenance/v1',
    predicate: {
      buildDefinition: {
        buildType: BUILD_TYPE,
        externalParameters: {
          command: BUILD_COMMAND,
          source: { uri: v.source, digest: { gitCommit: v.commit } },
          revision: v.revision,
        },
        internalParameters: {
          SOURCE_DATE_EPOCH: Number(v['source-date-epoch']),
          debianSuites: [v['debian-suite'], `${v['debian-suite']}-security`],
          debianMirrors: ['http://deb.debian.org/debian', 'http://deb.debian.org/debian-security'],
          node: process.version,
        },
        resolvedDependencies: [
          { uri: v.source, digest: { gitCommit: v.commit } },
          { name: 'package-lock.json', digest: { sha256: sha256('package-lock.json') } },
          { name: 'image/debian-packages.lock', digest: { sha256: sha256('image/debian-packages.lock') } },
          { name: 'scripts/image.sh', digest: { sha256: sha256('scripts/image.sh') } },
        ],
      },
      runDetails: {
        builder: { id: `${BUILD_TYPE}#scripts/image.sh` },
        metadata: { startedOn: v.started, finishedOn: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z') },
        byproducts: [{ name: 'sbom.cdx.json', mediaType: 'application/vnd.cyclonedx+json', digest: { sha256: sha256(sbom) } }],
      },
    },
  };
  writeFileSync(out, `${JSON.stringify(statement, null, 2)}\n`);
  console.log(`image: provenance for ${v.digest}`);
}

if (import.meta.url === `file://${process.argv[1]}`) main();
