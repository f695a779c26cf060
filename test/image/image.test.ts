/**
 * The OCI image `npm run image` built (build/image, or HERMES_AIP_HOST_IMAGE): its layout as umoci
 * and skopeo read it, the config (non-root 10001, exec-form entrypoint, labels, fixed times), that
 * it runs under runc with a read-only root and a tmpfs /tmp with Node as PID 1, its SBOM (valid
 * CycloneDX 1.6 naming every npm package of /app/node_modules and every dpkg package of the root
 * filesystem) and its provenance (subject = the digest the build printed, the commit, the
 * lockfile's digest, the build command). The §3 reference cases run against the host in the image
 * through the same runner (vitest.image.config.ts). Skipped, with the reason in the suite's name,
 * when the image has not been built; the container checks need root (runc).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Spec, Validation } from '@cyclonedx/cyclonedx-library';
import { afterAll, describe, expect, it } from 'vitest';
import { installedPackages } from '../../scripts/image/node-modules.js';
import { debPurl, dpkgPackages } from '../../scripts/image/sbom.js';
import { closeDeployments, startDeployment } from '../helpers/aip-runtime/deployment-fixture.js';
import { IMAGE_UID, loadImageBundle, runInImage, type ImageBundle } from '../helpers/aip-runtime/image-runner.js';
import { LISTENING } from '../helpers/aip-runtime/launcher.js';

const folder = resolve(process.env['HERMES_AIP_HOST_IMAGE'] ?? 'build/image');
const loaded = loadImageBundle(folder);
const missing = 'missing' in loaded ? loaded.missing : undefined;
const bundle = loaded as ImageBundle;
const isRoot = process.getuid?.() === 0;
if (missing) console.warn(`test/image skipped: ${missing}`);
else if (!isRoot) console.warn('test/image: the container checks are skipped: runc needs root');
const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { name: string; version: string };

const git = (...args: string[]) => execFileSync('git', args, { encoding: 'utf8' }).trim();
const json = (path: string) => JSON.parse(readFileSync(path, 'utf8'));
const blob = (digest: string) => join(folder, 'oci', 'blobs', ...digest.split(':'));
const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

describe.skipIf(missing !== undefined)(`OCI image${missing ? ` (skipped: ${missing})` : ''}`, () => {
  const digest = () => readFileSync(join(folder, 'digest'), 'utf8').trim();
  const manifest = () => json(blob(digest()));
  const config = () => json(blob(manifest().config.digest));
  const commitTime = () => Number(git('log', '-1', '--format=%ct', 'HEAD'));

  describe('layout and config', () => {
    it('index.json names one manifest, the digest the build printed, and skopeo reads the same', () => {
      const index = json(join(folder, 'oci', 'index.json'));
      expect(index.manifests).toHaveLength(1);
      expect(index.manifests[0].digest).toBe(digest());
      expect(index.manifests[0].annotations['org.opencontainers.image.ref.name']).toBe(pkg.version);
      expect(`sha256:${sha256(blob(digest()))}`).toBe(digest());
      const inspected = JSON.parse(execFileSync('skopeo', ['inspect', `oci:${join(folder, 'oci')}:${pkg.version}`], { encoding: 'utf8' }));
      expect(inspected.Digest).toBe(digest());
    });

    it('two gzip layers (Debian root filesystem, /app), each blob matching its digest', () => {
      const { layers } = manifest();
      expect(layers.map((layer: { mediaType: string }) => layer.mediaType)).toEqual([
        'application/vnd.oci.image.layer.v1.tar+gzip',
        'application/vnd.oci.image.layer.v1.tar+gzip',
      ]);
      for (const layer of layers) expect(`sha256:${sha256(blob(layer.digest))}`).toBe(layer.digest);
    });

    it('runs as 10001:10001 with an exec-form entrypoint, cmd host, in /app', () => {
      const { config: run } = config();
      expect(run.User).toBe('10001:10001');
      expect(run.Entrypoint).toEqual(['/usr/bin/node', '/app/dist/cli/main.js']);
      expect(run.Cmd).toEqual(['host']);
      expect(run.WorkingDir).toBe('/app');
      expect(run.StopSignal).toBe('SIGTERM');
      expect(run.ExposedPorts).toEqual({ '8081/tcp': {} });
    });

    it('labels source, revision (the commit) and version, also as manifest annotations', () => {
      const labels = config().config.Labels;
      const revision = labels['org.opencontainers.image.revision'] as string;
      expect(revision.replace(/-dirty$/, '')).toBe(git('rev-parse', 'HEAD'));
      expect(labels['org.opencontainers.image.version']).toBe(pkg.version);
      expect(labels['org.opencontainers.image.source']).toMatch(/\S/);
      for (const [name, value] of Object.entries(labels)) expect(manifest().annotations[name]).toBe(value);
    });

    it('every time in the config is the commit time (SOURCE_DATE_EPOCH), none the build time', () => {
      const image = config();
      const created = new Date(commitTime() * 1000).toISOString().replace('.000Z', 'Z');
      expect(image.created).toBe(created);
      expect(image.config.Labels['org.opencontainers.image.created']).toBe(created);
      expect(image.history.map((entry: { created: string }) => entry.created)).toEqual(image.history.map(() => created));
    });

    it('no file in the root filesystem is newer than the commit', () => {
      const limit = commitTime();
      const newer: string[] = [];
      const walk = (dir: string) => {
        for (const entry of readdirSync(dir)) {
          const path = join(dir, entry);
          const stat = lstatSync(path);
          if (Math.floor(stat.mtimeMs / 1000) > limit) newer.push(path);
          if (stat.isDirectory()) walk(path);
        }
      };
      walk(bundle.rootfs);
      expect(newer.slice(0, 10)).toEqual([]);
    });

    it('the Debian packages are exactly image/debian-packages.lock, on Node >= 20.19', () => {
      const installed = dpkgPackages(readFileSync(join(bundle.rootfs, 'var/lib/dpkg/status'), 'utf8'))
        .map((p) => `${p.name}=${p.version}`)
        .sort();
      expect(installed.join('\n')).toBe(readFileSync('image/debian-packages.lock', 'utf8').trim());
      const nodejs = installed.find((line) => line.startsWith('nodejs='))!;
      const [major, minor] = nodejs.slice('nodejs='.length).split('.').map(Number);
      expect(major! > 20 || (major === 20 && minor! >= 19), nodejs).toBe(true);
    });

    it('/app holds the lockfile of this commit and the production tree with pg and better-sqlite3', () => {
      expect(sha256(join(bundle.rootfs, 'app/package-lock.json'))).toBe(sha256('package-lock.json'));
      const names = new Set(installedPackages(join(bundle.rootfs, 'app')).map((p) => p.name));
      for (const name of ['pg', 'better-sqlite3', 'pino', 'undici', '@modelcontextprotocol/sdk']) expect(names).toContain(name);
      for (const name of ['vitest', 'typescript', '@biomejs/biome', 'tsx']) expect(names).not.toContain(name);
      expect(existsSync(join(bundle.rootfs, 'app/node_modules/better-sqlite3/build/Release/better_sqlite3.node'))).toBe(true);
    });
  });

  describe.skipIf(!isRoot)(`in a container (runc)${isRoot ? '' : ' (skipped: runc needs root)'}`, () => {
    const scratch: string[] = [];
    const scratchFolder = () => {
      const dir = mkdtempSync(join(tmpdir(), 'hermes-aip-image-'));
      scratch.push(dir);
      return dir;
    };
    afterAll(async () => {
      await closeDeployments();
      for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
    });

    it("the reference cases' hosts run in the image: the launcher starts them as PID 1 of a container", async () => {
      expect(process.env['HERMES_AIP_HOST_IMAGE'], 'vitest.image.config.ts sets HERMES_AIP_HOST_IMAGE').toBeTruthy();
      const { host } = await startDeployment();
      const line = host
        .stderr()
        .split('\n')
        .map((text) => {
          try {
            return JSON.parse(text) as Record<string, unknown>;
          } catch {
            return undefined;
          }
        })
        .find((entry) => entry?.['msg'] === LISTENING);
      expect(line).toMatchObject({ pid: 1, hostname: 'hermes-aip-host' });
    });

    it('Node is PID 1 as uid/gid 10001, the root filesystem is read-only and /tmp is a writable tmpfs', async () => {
      const probe = `
        const fs = require('node:fs');
        const tryWrite = (path) => { try { fs.writeFileSync(path, 'x'); return 'written'; } catch (error) { return error.code; } };
        console.log(JSON.stringify({ pid: process.pid, uid: process.getuid(), gid: process.getgid(), version: process.version,
          root: tryWrite('/probe'), app: tryWrite('/app/probe'), tmp: tryWrite('/tmp/probe'),
          sqlite: typeof require('/app/node_modules/better-sqlite3'), pg: typeof require('/app/node_modules/pg').Client }));`;
      const run = await runInImage(bundle, ['/usr/bin/node', '-e', probe], { folder: scratchFolder() });
      expect(run.code, run.stderr).toBe(0);
      const seen = JSON.parse(run.stdout);
      expect(seen).toMatchObject({ pid: 1, uid: IMAGE_UID, gid: IMAGE_UID, root: 'EROFS', app: 'EROFS', tmp: 'written', sqlite: 'function', pg: 'function' });
    });

    it('better-sqlite3 opens a database on the image Node (its addon loads against Debian libnode)', async () => {
      const dir = scratchFolder();
      const probe = `const Database = require('/app/node_modules/better-sqlite3'); const db = new Database(process.argv[1]);
        db.exec('create table t (x)'); db.prepare('insert into t values (?)').run(42); console.log(db.prepare('select x from t').get().x);`;
      const run = await runInImage(bundle, ['/usr/bin/node', '-e', probe, join(dir, 'probe.sqlite')], { folder: dir });
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout.trim()).toBe('42');
    });

    it('the entrypoint runs the CLI: hermes-aip host --print-did from an owner-only seed file', async () => {
      const dir = scratchFolder();
      execFileSync('sh', ['-c', `umask 077; printf '%s\\n' ${'ab'.repeat(32)} > ${join(dir, 'seed')}`]);
      const run = await runInImage(bundle, ['/usr/bin/node', '/app/dist/cli/main.js', 'host', '--print-did'], {
        folder: dir,
        env: { AIP_CONNECTOR_HOST_SIGNING_SEED_FILE: join(dir, 'seed') },
      });
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout.trim()).toMatch(/^did:key:z6Mk/);
    });
  });

  describe('SBOM', () => {
    const sbomText = () => readFileSync(join(folder, 'sbom.cdx.json'), 'utf8');
    const components = () => JSON.parse(sbomText()).components as Array<{ purl?: string; properties?: Array<{ name: string; value: string }> }>;

    it('validates against the CycloneDX 1.6 JSON schema (strict)', async () => {
      expect(await new Validation.JsonStrictValidator(Spec.Version.v1dot6).validate(sbomText())).toBeNull();
    });

    it('describes the image by its digest', () => {
      const { metadata } = JSON.parse(sbomText());
      expect(metadata.component.type).toBe('container');
      expect(metadata.component.hashes).toEqual([{ alg: 'SHA-256', content: digest().slice('sha256:'.length) }]);
    });

    it('lists every package in the image /app/node_modules, at its path and version', () => {
      const listed = new Set(
        components().flatMap((c) => {
          const path = c.properties?.find((p) => p.name === 'cdx:npm:package:path')?.value;
          return path && c.purl ? [`${path} ${decodeURIComponent(c.purl)}`] : [];
        }),
      );
      const installed = installedPackages(join(bundle.rootfs, 'app'));
      expect(installed.length).toBeGreaterThan(100);
      const unlisted = installed.filter(({ location, name, version }) => !listed.has(`${location} pkg:npm/${name}@${version}`));
      expect(unlisted).toEqual([]);
    });

    it('lists every dpkg package of the root filesystem', () => {
      const purls = new Set(components().map((c) => c.purl));
      const debs = dpkgPackages(readFileSync(join(bundle.rootfs, 'var/lib/dpkg/status'), 'utf8'));
      expect(debs.length).toBeGreaterThan(50);
      const distro = `debian-${/^VERSION_ID="?(\d+)/m.exec(readFileSync(join(bundle.rootfs, 'etc/os-release'), 'utf8'))![1]}`;
      expect(debs.filter((deb) => !purls.has(debPurl(deb, distro)))).toEqual([]);
    });
  });

  describe('provenance', () => {
    const statement = () => json(join(folder, 'provenance.intoto.json'));

    it('is an in-toto v1 statement with a SLSA v1 predicate whose subject is the image digest', () => {
      const s = statement();
      expect(s._type).toBe('https://in-toto.io/Statement/v1');
      expect(s.predicateType).toBe('https://slsa.dev/provenance/v1');
      expect(s.subject).toEqual([{ name: `${pkg.name}:${pkg.version}`, digest: { sha256: digest().slice('sha256:'.length) } }]);
    });

    it('names the commit, the lockfile digest, the build command and the SBOM', () => {
      const { buildDefinition, runDetails } = statement().predicate;
      expect(buildDefinition.externalParameters.command).toBe('npm run image');
      expect(buildDefinition.externalParameters.source.digest.gitCommit).toBe(git('rev-parse', 'HEAD'));
      const lock = buildDefinition.resolvedDependencies.find((d: { name?: string }) => d.name === 'package-lock.json');
      expect(lock.digest.sha256).toBe(sha256('package-lock.json'));
      const debian = buildDefinition.resolvedDependencies.find((d: { name?: string }) => d.name === 'image/debian-packages.lock');
      expect(debian.digest.sha256).toBe(sha256('image/debian-packages.lock'));
      expect(buildDefinition.internalParameters.SOURCE_DATE_EPOCH).toBe(commitTime());
      expect(runDetails.byproducts[0].digest.sha256).toBe(sha256(join(folder, 'sbom.cdx.json')));
    });
  });
});
