/**
 * The image's CycloneDX 1.6 SBOM: cyclonedx-npm's BOM of the staged /app tree (every npm package,
 * made by that generator from `npm ls`), merged with one component per dpkg package of the root
 * filesystem (from its /var/lib/dpkg/status) and the Debian release, under a `container` component
 * for the image digest. No well-kept CycloneDX generator for dpkg databases is reachable here
 * (syft and trivy are not in Debian, on npm or on PyPI; cyclonedx-py reads Python environments
 * only), so the Debian components are built with @cyclonedx/cyclonedx-library's models and
 * normalizer, and the merged document is validated with its strict JSON validator (the CycloneDX
 * 1.6 JSON schema the library ships). A document that does not validate fails the build.
 *
 * tsx scripts/image/sbom.ts --npm npm.cdx.json --rootfs bundle/rootfs --name N --version V --digest sha256:… --out sbom.cdx.json
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Enums, Models, SPDX, Serialize, Spec, Validation } from '@cyclonedx/cyclonedx-library';

export interface DpkgPackage {
  name: string;
  version: string;
  architecture: string;
  source?: string;
  maintainer?: string;
  homepage?: string;
  description?: string;
}

/** The installed packages of a dpkg status file (`Status: install ok installed`), in file order. */
export function dpkgPackages(statusText: string): DpkgPackage[] {
  const packages: DpkgPackage[] = [];
  for (const paragraph of statusText.split(/\n\n+/)) {
    const fields = new Map<string, string>();
    let last = '';
    for (const line of paragraph.split('\n')) {
      if (/^\s/.test(line)) {
        if (last) fields.set(last, `${fields.get(last)}\n${line}`);
        continue;
      }
      const colon = line.indexOf(':');
      if (colon <= 0) continue;
      last = line.slice(0, colon);
      fields.set(last, line.slice(colon + 1).trim());
    }
    const name = fields.get('Package');
    if (!name || fields.get('Status') !== 'install ok installed') continue;
    const pkg: DpkgPackage = { name, version: fields.get('Version') ?? '', architecture: fields.get('Architecture') ?? 'all' };
    const source = fields.get('Source');
    if (source) pkg.source = source;
    const maintainer = fields.get('Maintainer');
    if (maintainer) pkg.maintainer = maintainer;
    const homepage = fields.get('Homepage');
    if (homepage) pkg.homepage = homepage;
    const description = fields.get('Description')?.split('\n')[0];
    if (description) pkg.description = description;
    packages.push(pkg);
  }
  return packages;
}

/** The package URL of a Debian package (purl-spec `deb` type). */
export function debPurl(pkg: DpkgPackage, distro: string): string {
  return `pkg:deb/debian/${encodeURIComponent(pkg.name)}@${encodeURIComponent(pkg.version)}?arch=${pkg.architecture}&distro=${distro}`;
}

/**
 * The licenses a machine-readable (DEP-5) copyright file names in its `License:` fields, as SPDX
 * ids where the library knows them; nothing for a free-form file (a limitation, see docs/image.md).
 */
function copyrightLicenses(rootfs: string, pkg: DpkgPackage): Models.License[] {
  const path = join(rootfs, 'usr/share/doc', pkg.name, 'copyright');
  if (!existsSync(path)) return [];
  const text = readFileSync(path, 'utf8');
  if (!/^Format:\s*\S*copyright-format/m.test(text)) return [];
  const names = new Set<string>();
  for (const [, name = ''] of text.matchAll(/^License:[ \t]*(\S[^\n]*)$/gm)) names.add(name.trim());
  return [...names].sort().map((name) => {
    const id = SPDX.fixupSpdxId(name);
    return id ? new Models.SpdxLicense(id) : new Models.NamedLicense(name);
  });
}

function main(): void {
  const { values } = parseArgs({
    options: {
      npm: { type: 'string' },
      rootfs: { type: 'string' },
      name: { type: 'string' },
      version: { type: 'string' },
      digest: { type: 'string' },
      out: { type: 'string' },
    },
  });
  const { npm, rootfs, name, version, digest, out } = values;
  if (!npm || !rootfs || !name || !version || !digest || !out)
    throw new Error('usage: sbom.ts --npm F --rootfs D --name N --version V --digest sha256:… --out F');

  const bom = JSON.parse(readFileSync(npm, 'utf8')) as {
    specVersion: string;
    metadata: { component: Record<string, unknown> & { 'bom-ref': string }; tools: { components: unknown[] }; properties?: unknown[] };
    components: unknown[];
    dependencies: Array<{ ref: string; dependsOn?: string[] }>;
  };
  if (bom.specVersion !== '1.6') throw new Error(`cyclonedx-npm wrote spec ${bom.specVersion}, expected 1.6`);

  const normalizer = new Serialize.JSON.Normalize.Factory(Spec.Spec1dot6).makeForComponent();
  const normalize = (component: Models.Component) => normalizer.normalize(component, { sortLists: true });

  const osRelease = readFileSync(join(rootfs, 'etc/os-release'), 'utf8');
  const osField = (key: string) => new RegExp(`^${key}="?([^"\\n]*)"?$`, 'm').exec(osRelease)?.[1] ?? '';
  const debianVersion = readFileSync(join(rootfs, 'etc/debian_version'), 'utf8').trim();
  const distro = `debian-${osField('VERSION_ID')}`;
  const osRef = `os:debian@${debianVersion}`;
  const os = new Models.Component(Enums.ComponentType.OperatingSystem, 'debian', {
    bomRef: osRef,
    version: debianVersion,
    description: osField('PRETTY_NAME'),
  });

  const debs = dpkgPackages(readFileSync(join(rootfs, 'var/lib/dpkg/status'), 'utf8'));
  const debRefs: string[] = [];
  const debComponents = debs.map((pkg) => {
    const purl = debPurl(pkg, distro);
    debRefs.push(purl);
    const component = new Models.Component(Enums.ComponentType.Library, pkg.name, { bomRef: purl, version: pkg.version, purl });
    if (pkg.description) component.description = pkg.description;
    if (pkg.maintainer) component.supplier = new Models.OrganizationalEntity({ name: pkg.maintainer });
    if (pkg.homepage) component.externalReferences.add(new Models.ExternalReference(pkg.homepage, Enums.ExternalReferenceType.Website));
    component.properties.add(new Models.Property('cdx:debian:package:architecture', pkg.architecture));
    if (pkg.source) component.properties.add(new Models.Property('cdx:debian:package:source', pkg.source));
    for (const license of copyrightLicenses(rootfs, pkg)) component.licenses.add(license);
    return component;
  });

  const hex = digest.replace(/^sha256:/, '');
  const imagePurl = `pkg:oci/${encodeURIComponent(name)}@${encodeURIComponent(digest)}?tag=${encodeURIComponent(version)}`;
  const image = new Models.Component(Enums.ComponentType.Container, name, {
    bomRef: imagePurl,
    version,
    purl: imagePurl,
    description: 'OCI image of hermes-aip host (scripts/image.sh)',
  });
  image.hashes.set(Enums.HashAlgorithm['SHA-256'], hex);

  const app = bom.metadata.component;
  bom.metadata.component = normalize(image) as unknown as typeof app;
  bom.components = [app, normalize(os), ...debComponents.map(normalize), ...bom.components];
  bom.dependencies = [{ ref: imagePurl, dependsOn: [app['bom-ref'], osRef, ...debRefs].sort() }, ...bom.dependencies];

  const text = `${JSON.stringify(bom, null, 2)}\n`;
  new Validation.JsonStrictValidator(Spec.Version.v1dot6)
    .validate(text)
    .then((error) => {
      if (error !== null) {
        console.error(JSON.stringify(error, null, 2));
        throw new Error('the merged SBOM does not validate against the CycloneDX 1.6 JSON schema');
      }
      writeFileSync(out, text);
      console.log(`image: SBOM with ${bom.components.length - debs.length - 2} npm packages, ${debs.length} Debian packages, validated (CycloneDX 1.6)`);
    })
    .catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
}

if (import.meta.url === `file://${process.argv[1]}`) main();
