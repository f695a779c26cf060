/**
 * Runs `hermes-aip` inside the built OCI image (`npm run image` → build/image/) with runc, as a
 * container engine would: the process, user, working directory and environment of the image
 * config (umoci unpack's bundle/config.json), a read-only root filesystem, a tmpfs /tmp, every
 * capability dropped, no new privileges. The host's folder (seed, config, SQLite ledger) is
 * bind-mounted at its own path and given to uid 10001; the container shares the host's network
 * namespace so that the runtime double and the Hermes simulator on 127.0.0.1 are reachable (what
 * `--network host` does). Signals go through `runc kill`, as kubelet/containerd send them, so the
 * host's Node is PID 1 of its PID namespace when it gets them.
 *
 * Chosen by `HERMES_AIP_HOST_IMAGE=<image folder>` (vitest.image.config.ts sets it).
 */
import { execFileSync, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { HostRunner, RunningHost } from './launcher.js';

export const IMAGE_UID = 10001;

export interface ImageBundle {
  /** The image folder (build/image). */
  folder: string;
  /** bundle/rootfs, absolute. */
  rootfs: string;
  /** umoci's runtime config for the image. */
  config: RuntimeSpec;
}

/** The OCI runtime spec is a large JSON document; the runner edits a few fields. */
type RuntimeSpec = Record<string, any>;

/** The unpacked image under `folder` (build/image), or why it cannot be used. */
export function loadImageBundle(folder: string): ImageBundle | { missing: string } {
  const configPath = join(folder, 'bundle', 'config.json');
  if (!existsSync(configPath)) return { missing: `${configPath} does not exist: build the image with \`npm run image\` (as root)` };
  return { folder: resolve(folder), rootfs: resolve(folder, 'bundle', 'rootfs'), config: JSON.parse(readFileSync(configPath, 'utf8')) as RuntimeSpec };
}

function chownTree(path: string, uid: number): void {
  chownSync(path, uid, uid);
  if (!lstatSync(path).isDirectory()) return;
  for (const entry of readdirSync(path)) chownTree(join(path, entry), uid);
}

/** The image's entrypoint (`umoci unpack` puts Entrypoint + Cmd into process.args; Cmd is `host`). */
export function entrypointOf(bundle: ImageBundle): string[] {
  const args = bundle.config['process'].args as string[];
  if (args.at(-1) !== 'host') throw new Error(`the image's process.args do not end in its cmd "host": ${JSON.stringify(args)}`);
  return args.slice(0, -1);
}

/** The runtime spec for one run of `argv` (the whole command line) with `env`, `folder` bind-mounted read-write. */
export function containerSpec(bundle: ImageBundle, argv: string[], env: Record<string, string>, folder: string): RuntimeSpec {
  const spec = structuredClone(bundle.config);
  const process = spec['process'];
  process.args = argv;
  process.terminal = false;
  const imageEnv = (process.env as string[]).filter((entry) => !Object.hasOwn(env, entry.slice(0, entry.indexOf('='))));
  process.env = [...imageEnv, ...Object.entries(env).flatMap(([name, value]) => (name === 'PATH' || name === 'HOME' ? [] : [`${name}=${value}`]))];
  process.noNewPrivileges = true;
  process.capabilities = { bounding: [], effective: [], inheritable: [], permitted: [], ambient: [] };
  process.rlimits = [{ type: 'RLIMIT_NOFILE', hard: 4096, soft: 4096 }];
  spec['root'] = { path: bundle.rootfs, readonly: true };
  spec['hostname'] = 'hermes-aip-host';
  spec['mounts'] = [
    ...(spec['mounts'] as Array<{ destination: string }>).filter((mount) => mount.destination !== '/tmp'),
    { destination: '/tmp', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'noexec', 'mode=1777', 'size=64m'] },
    { destination: folder, type: 'bind', source: folder, options: ['rbind', 'rw', 'nosuid', 'nodev', 'noexec'] },
  ];
  const linux = spec['linux'];
  linux.namespaces = (linux.namespaces as Array<{ type: string }>).filter((namespace) => namespace.type !== 'network');
  return spec;
}

function runc(args: string[]): void {
  try {
    execFileSync('runc', args, { stdio: 'ignore' });
  } catch {}
}

/** A runner that starts each host as its own runc container of the image. */
export function imageRunner(bundle: ImageBundle): HostRunner {
  return {
    name: `runc: ${bundle.folder}`,
    spawn(args, env, folder): RunningHost {
      const id = `hermes-aip-test-${randomBytes(6).toString('hex')}`;
      const bundleDir = join(folder, `bundle-${id}`);
      mkdirSync(bundleDir);
      writeFileSync(join(bundleDir, 'config.json'), JSON.stringify(containerSpec(bundle, [...entrypointOf(bundle), ...args], env, folder), null, 2));
      chownTree(folder, IMAGE_UID);
      const child: ChildProcessWithoutNullStreams = spawn('runc', ['run', '--bundle', bundleDir, id], { stdio: 'pipe' });
      let gone = false;
      child.once('exit', () => {
        gone = true;
        runc(['delete', '--force', id]);
      });
      return {
        child,
        signal: (signal) => {
          if (!gone) runc(['kill', id, signal.replace(/^SIG/, '')]);
        },
      };
    },
  };
}

/** The image runner when `HERMES_AIP_HOST_IMAGE` names an image folder; throws when it is not built. */
export function imageRunnerFromEnvironment(): HostRunner | undefined {
  const folder = process.env['HERMES_AIP_HOST_IMAGE'];
  if (!folder) return undefined;
  const bundle = loadImageBundle(folder);
  if ('missing' in bundle) throw new Error(`HERMES_AIP_HOST_IMAGE: ${bundle.missing}`);
  return imageRunner(bundle);
}

/** Runs `argv` once in a container of the image (same confinement as the hosts) and collects its output. */
export async function runInImage(
  bundle: ImageBundle,
  argv: string[],
  options: { env?: Record<string, string>; folder: string },
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const id = `hermes-aip-test-${randomBytes(6).toString('hex')}`;
  const bundleDir = join(options.folder, `bundle-${id}`);
  mkdirSync(bundleDir);
  writeFileSync(join(bundleDir, 'config.json'), JSON.stringify(containerSpec(bundle, argv, options.env ?? {}, options.folder), null, 2));
  chownTree(options.folder, IMAGE_UID);
  const child = spawn('runc', ['run', '--bundle', bundleDir, id], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (data: string) => (stdout += data));
  child.stderr.setEncoding('utf8').on('data', (data: string) => (stderr += data));
  const code = await new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)));
  runc(['delete', '--force', id]);
  return { code, stdout, stderr };
}
