/**
 * Launches the built `hermes-aip host` (dist/cli/main.js, or the OCI image through a `HostRunner`
 * such as ./image-runner.ts, chosen by `HERMES_AIP_HOST_IMAGE`) against a runtime double: a Hermes
 * endpoints config for a simulator, an owner-only seed file, a durable ledger (a SQLite file,
 * or a PostgreSQL schema through an owner-only DATABASE_URL_FILE), the `AIP_CONNECTOR_HOST_*`
 * variables; waits for the `AIP connector host listening` log line, retries on another free
 * port when the host exits with `cannot listen … EADDRINUSE`. Every child is killed by
 * `stopHosts()` (call it in afterEach) or at process exit.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createHermesConnector } from 'aip-connector-hermes-agent';
import { signingKeyFromSeed } from '../../../src/host/wire/keys.js';
import { canonicalJson } from '../../../src/host/wire/json.js';
import { reserialize } from '../../../src/host/wire/reference-types.js';
import type { HostIdentity } from './callback-ingress.js';
import { imageRunnerFromEnvironment } from './image-runner.js';
import { GATEWAY_PRINCIPAL_ID, INSTANCE_ID, MESSAGES_PATH, TENANT_ID, TRUST_DOMAIN, TYPE_ID, VERSION_ID, replicaId } from './deployment.js';
import type { HostTarget } from './dispatcher.js';
import type { AipRuntime } from './runtime.js';

export const CLI = fileURLToPath(new URL('../../../dist/cli/main.js', import.meta.url));
export const LISTENING = 'AIP connector host listening';
const PORT_ATTEMPTS = 5;
const START_TIMEOUT_MS = 20_000;

export type LedgerChoice = { kind: 'sqlite'; path: string } | { kind: 'postgres'; connectionString: string };

export interface LaunchOptions {
  runtime: AipRuntime;
  /** The Hermes the host's one endpoint (`local`) reaches, and its API key. */
  hermes: { url: string; apiKey: string };
  /** Replica number (1, 2, …): `crepl_hermes_acme_<n>`. */
  replica?: number;
  /** The ledger; default a SQLite file in the host's folder. Re-use one to restart "the same" host. */
  ledger?: LedgerChoice;
  /** 64 hex chars; default fresh. Re-use one to restart the same host identity. */
  seedHex?: string;
  /** More or overriding `AIP_CONNECTOR_HOST_*` settings, without the prefix (e.g. `HEARTBEAT_MS`). */
  settings?: Record<string, string>;
  /** How the process starts; default `HERMES_AIP_HOST_IMAGE`'s image runner when set, else this Node on dist/. */
  runner?: HostRunner;
  /** Node options before the CLI script (e.g. `--max-old-space-size=256`): the host on this Node, not in an image. */
  nodeArgs?: string[];
}

/** A started host process and how to signal it (a container's process is signalled through its runtime). */
export interface RunningHost {
  child: ChildProcessWithoutNullStreams;
  signal(signal: NodeJS.Signals): void;
}

/**
 * Starts `hermes-aip <args>` with exactly `env`; every file the host reads or writes is under
 * `folder` (an absolute path the runner must make reachable at the same path).
 */
export interface HostRunner {
  readonly name: string;
  spawn(args: string[], env: Record<string, string>, folder: string): RunningHost;
}

/** The built CLI on this process's Node: `node [nodeArgs] dist/cli/main.js <args>`. */
export function nodeRunner(nodeArgs: readonly string[] = []): HostRunner {
  return {
    name: 'node dist/cli/main.js',
    spawn(args, env) {
      const child = spawn(process.execPath, [...nodeArgs, CLI, ...args], { env, stdio: 'pipe' });
      return { child, signal: (signal) => void child.kill(signal) };
    },
  };
}

/** The runner the reference cases use: the image's when `HERMES_AIP_HOST_IMAGE` names a built image. */
export function defaultRunner(): HostRunner {
  return imageRunnerFromEnvironment() ?? nodeRunner();
}

export interface HostProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly folder: string;
  readonly seedHex: string;
  readonly ledger: LedgerChoice;
  readonly origin: string;
  readonly target: HostTarget;
  readonly manifest: Record<string, any>;
  /** Everything the host wrote to stderr so far. */
  stderr(): string;
  stdout(): string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(signal?: NodeJS.Signals): void;
}

const live = new Map<ChildProcessWithoutNullStreams, RunningHost['signal']>();
const folders = new Set<string>();
process.once('exit', () => {
  for (const signal of live.values()) signal('SIGKILL');
});

/** Kills every host still running and removes their folders. */
export async function stopHosts(): Promise<void> {
  const waits = [...live.keys()].map(
    (child) => new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve()))),
  );
  for (const signal of live.values()) signal('SIGKILL');
  await Promise.all(waits);
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
  folders.clear();
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function ownerOnlyFile(folder: string, name: string, text: string): string {
  const path = join(folder, name);
  writeFileSync(path, text, { mode: 0o600 });
  return path;
}

/** Where a host reaches its runtime double, and what it trusts there. */
export interface RuntimeCoordinates {
  readonly controlUrl: string;
  readonly controlDid: string;
  readonly callbackUrl: string;
  readonly gatewayDid: string;
  readonly leaseTtlMs: number;
}

export function runtimeCoordinates(runtime: AipRuntime): RuntimeCoordinates {
  return {
    controlUrl: runtime.control.url,
    controlDid: runtime.control.did,
    callbackUrl: runtime.ingress.url,
    gatewayDid: runtime.gateway.key.did,
    leaseTtlMs: runtime.leaseTtlMs,
  };
}

/** What a host environment is made of besides its runtime. */
export interface HostPlacement {
  readonly ledger: LedgerChoice;
  readonly folder: string;
  readonly seedPath: string;
  readonly port: number;
  readonly replica?: number;
  readonly settings?: Record<string, string>;
}

/** The owner-only seed file, the Hermes key file and the endpoints config (`--config`) of a host in `folder`. */
export function writeHostFiles(folder: string, seedHex: string, hermes: LaunchOptions['hermes']): { seedPath: string; configPath: string } {
  const seedPath = ownerOnlyFile(folder, 'host.seed', `${seedHex}\n`);
  ownerOnlyFile(folder, 'hermes.key', `${hermes.apiKey}\n`);
  const configPath = ownerOnlyFile(
    folder,
    'endpoints.json',
    JSON.stringify({ endpoints: [{ id: 'local', baseUrl: hermes.url, apiKeyFile: 'hermes.key', tenantId: TENANT_ID }] }),
  );
  return { seedPath, configPath };
}

/** The variables of the reference bootstrap (crates/aip-connector-host-bootstrap), for one replica. */
export function hostEnvironment(runtime: RuntimeCoordinates, placement: HostPlacement): Record<string, string> {
  const { ledger, folder, seedPath, port } = placement;
  const settings: Record<string, string> = {
    BIND: `127.0.0.1:${port}`,
    PUBLIC_ENDPOINT: `http://127.0.0.1:${port}${MESSAGES_PATH}`,
    ALLOW_LOOPBACK_HTTP: 'true',
    CONTROL_ENDPOINT: runtime.controlUrl,
    CONTROL_DID: runtime.controlDid,
    CALLBACK_ENDPOINT: runtime.callbackUrl,
    CALLBACK_ALLOW_HTTP: 'true',
    CALLBACK_ALLOW_PRIVATE: 'true',
    SIGNING_SEED_FILE: seedPath,
    GATEWAY_PRINCIPAL_ID,
    GATEWAY_DID: runtime.gatewayDid,
    TRUST_DOMAIN,
    TENANT_ID,
    TYPE_ID,
    VERSION_ID,
    INSTANCE_ID,
    REPLICA_ID: replicaId(placement.replica ?? 1),
    MEMBERSHIP_ID: 'membership-hermes-acme',
    ARTIFACT_DIGEST: `sha256:${'1'.repeat(64)}`,
    SECRET_PROVIDER_REF: 'secret://tenant-acme/hermes',
    LEASE_TTL_MS: String(runtime.leaseTtlMs),
    ...(ledger.kind === 'postgres' ? { DATABASE_URL_FILE: ownerOnlyFile(folder, 'database-url', `${ledger.connectionString}\n`) } : {}),
    ...placement.settings,
  };
  const env: Record<string, string> = { PATH: process.env['PATH'] ?? '' };
  if (process.env['HOME']) env['HOME'] = process.env['HOME'];
  for (const [name, value] of Object.entries(settings)) env[`AIP_CONNECTOR_HOST_${name}`] = value;
  if (ledger.kind === 'sqlite') env['HERMES_LEDGER'] = `sqlite:${ledger.path}`;
  return env;
}

type Started = { kind: 'listening'; line: Record<string, unknown> } | { kind: 'exited'; code: number | null; addressInUse: boolean };

function started(child: ChildProcessWithoutNullStreams, output: { stderr: string }): Promise<Started> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`hermes-aip host did not log "${LISTENING}" within ${START_TIMEOUT_MS} ms; stderr: ${output.stderr}`)),
      START_TIMEOUT_MS,
    );
    const onData = () => {
      for (const line of output.stderr.split('\n')) {
        if (!line.includes(LISTENING)) continue;
        try {
          const parsed = JSON.parse(line) as Record<string, unknown>;
          if (parsed['msg'] !== LISTENING) continue;
          clearTimeout(timer);
          child.stderr.off('data', onData);
          resolve({ kind: 'listening', line: parsed });
          return;
        } catch {}
      }
    };
    child.stderr.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ kind: 'exited', code, addressInUse: /cannot listen on .*EADDRINUSE/.test(output.stderr) });
    });
  });
}

/** The host's principal as the reference bootstrap makes it: the connector manifest's `agent` (id and kind). */
async function hostPrincipal(simulatorUrl: string): Promise<{ id: string; kind: string }> {
  const connector = createHermesConnector({ endpoints: [{ id: 'local', baseUrl: simulatorUrl, tenantId: TENANT_ID }] });
  const { id, kind } = connector.manifest().agent;
  await connector.close();
  return { id, kind };
}

/** `digest_json` of §1.9: sha256 of the canonical JSON of the manifest as the reference re-serialises it. */
export function manifestDigest(manifest: unknown): string {
  const decoded = reserialize.manifest(manifest);
  if (!decoded.ok) throw new Error(`the served manifest does not decode as the reference Manifest: ${decoded.reason}`);
  return `sha256:${createHash('sha256').update(canonicalJson(decoded.tree)).digest('hex')}`;
}

async function readManifest(origin: string): Promise<Record<string, any>> {
  const response = await fetch(`${origin}/aip/v1/manifest`);
  if (response.status !== 200) throw new Error(`GET /aip/v1/manifest answered ${response.status}: ${await response.text()}`);
  return (await response.json()) as Record<string, any>;
}

export async function launchHost(options: LaunchOptions): Promise<HostProcess> {
  const folder = mkdtempSync(join(tmpdir(), 'hermes-aip-host-'));
  folders.add(folder);
  const seedHex = options.seedHex ?? randomBytes(32).toString('hex');
  const did = signingKeyFromSeed(Buffer.from(seedHex, 'hex')).did;
  if (!options.runtime.hostDids.includes(did)) options.runtime.hostDids.push(did);
  const { seedPath, configPath } = writeHostFiles(folder, seedHex, options.hermes);
  const ledger: LedgerChoice = options.ledger ?? { kind: 'sqlite', path: join(folder, 'ledger.sqlite') };
  const runner = options.runner ?? (options.nodeArgs === undefined ? defaultRunner() : nodeRunner(options.nodeArgs));
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const env = hostEnvironment(runtimeCoordinates(options.runtime), { ledger, folder, seedPath, port, replica: options.replica, settings: options.settings });
    const { child, signal } = runner.spawn(['host', '--config', configPath], env, folder);
    child.stdin.end();
    live.set(child, signal);
    const output = { stderr: '', stdout: '' };
    child.stderr.setEncoding('utf8').on('data', (data: string) => (output.stderr += data));
    child.stdout.setEncoding('utf8').on('data', (data: string) => (output.stdout += data));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => {
        live.delete(child);
        resolve({ code, signal });
      }),
    );
    const origin = `http://127.0.0.1:${port}`;
    const host = {
      child,
      folder,
      seedHex,
      ledger,
      origin,
      stderr: () => output.stderr,
      stdout: () => output.stdout,
      exited,
      kill: (sig: NodeJS.Signals = 'SIGKILL') => signal(sig),
    };
    const start = await started(child, output);
    if (start.kind === 'exited') {
      if (start.addressInUse && attempt < PORT_ATTEMPTS) continue;
      throw new Error(`hermes-aip host exited with ${start.code} before listening; stderr: ${output.stderr}`);
    }
    if (start.line['did'] !== did) throw new Error(`the host logged did ${String(start.line['did'])}, expected ${did}`);
    const identity: HostIdentity = {
      did,
      principal: { ...(await hostPrincipal(options.hermes.url)), trust_domain: TRUST_DOMAIN, did },
      replicaId: replicaId(options.replica ?? 1),
    };
    return { ...host, ...(await routeToHost(options.runtime, origin, identity)) };
  }
}

/** The runtime double trusts a listening host's stream chunks and routes actions to it, pinned to the manifest it serves. */
export async function routeToHost(runtime: AipRuntime, origin: string, identity: HostIdentity): Promise<{ manifest: Record<string, any>; target: HostTarget }> {
  const manifest = await readManifest(origin);
  runtime.ingress.trustHost(identity);
  const target: HostTarget = {
    url: `${origin}${MESSAGES_PATH}`,
    identity,
    tenantId: TENANT_ID,
    instanceId: INSTANCE_ID,
    versionId: VERSION_ID,
    manifestDigest: manifestDigest(manifest),
  };
  return { manifest, target };
}
