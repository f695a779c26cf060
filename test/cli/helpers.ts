import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, expect } from 'vitest';
import { startHermesSimulator, type HermesSimulator, type HermesSimulatorOptions } from 'aip-connector-hermes-agent/simulator';
import { assertMatches } from '../helpers/schema-check.js';

/** The built CLI: `npm test` (and `npm run build`) write it before the tests run. */
export const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));
export const CHECK_IDS = [
  'discovery',
  'start_and_status',
  'ordered_events',
  'isolated_approvals',
  'approval_requires_evidence',
  'stop_followed',
  'disconnect_reconciled',
  'evidence_loss',
];

export interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  env?: Record<string, string>;
  cwd?: string;
  /** Only to fail a hung test, never a timing assertion. */
  timeoutMs?: number;
}

/** A minimal environment: nothing of the caller's HERMES_* variables leaks into the CLI under test. */
function childEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = { PATH: process.env['PATH'] ?? '' };
  if (process.env['HOME']) env['HOME'] = process.env['HOME'];
  if (process.env['TMPDIR']) env['TMPDIR'] = process.env['TMPDIR'];
  return { ...env, ...extra };
}

export function spawnCli(args: string[], options: CliOptions = {}): ChildProcessWithoutNullStreams {
  const child = spawn(process.execPath, [CLI, ...args], { cwd: options.cwd, env: childEnv(options.env), stdio: 'pipe' });
  child.stdin.end();
  spawned.push(child);
  return child;
}

/** Runs `hermes-aip ...args` to its exit and collects its output. */
export function runCli(args: string[], options: CliOptions = {}): Promise<CliRun> {
  return finished(spawnCli(args, options), args, options.timeoutMs ?? 60_000);
}

export function finished(child: ChildProcessWithoutNullStreams, args: string[], timeoutMs = 60_000): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (data: string) => (stdout += data));
    child.stderr.setEncoding('utf8').on('data', (data: string) => (stderr += data));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`hermes-aip ${args.join(' ')} did not exit within ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Resolves with everything read from `stream` once it contains `text`. */
export function waitForOutput(stream: NodeJS.ReadableStream, text: string | RegExp, what = String(text)): Promise<string> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const onData = (data: Buffer | string): void => {
      seen += data.toString();
      if (typeof text === 'string' ? seen.includes(text) : text.test(seen)) {
        stream.off('data', onData);
        resolve(seen);
      }
    };
    stream.on('data', onData);
    stream.once('end', () => reject(new Error(`output ended before ${what}; got: ${seen}`)));
  });
}

const spawned: ChildProcessWithoutNullStreams[] = [];
const folders: string[] = [];
const simulators: HermesSimulator[] = [];

afterEach(async () => {
  for (const child of spawned.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await Promise.all(simulators.splice(0).map((sim) => sim.close()));
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

export function tempDir(): string {
  const folder = mkdtempSync(join(tmpdir(), 'hermes-aip-test-'));
  folders.push(folder);
  return folder;
}

export const SIM_KEY = 'hk_cli_test_key_5f0c1e9a7b3d';

/** A simulator on 127.0.0.1:0 (closed after the test) and an endpoints file for it, its key in a key file beside it. */
export async function simulatorWithConfig(
  options: Partial<HermesSimulatorOptions> = {},
  endpoint: Record<string, string> = {},
): Promise<{ sim: HermesSimulator; configPath: string; folder: string }> {
  const sim = await startHermesSimulator({ apiKey: SIM_KEY, keepaliveMs: 200, ...options });
  simulators.push(sim);
  const folder = tempDir();
  writeFileSync(join(folder, 'hermes.key'), `${SIM_KEY}\n`, { mode: 0o600 });
  const configPath = join(folder, 'endpoints.json');
  writeFileSync(configPath, JSON.stringify({ endpoints: [{ id: 'local', baseUrl: sim.url, apiKeyFile: 'hermes.key', ...endpoint }] }));
  return { sim, configPath, folder };
}

export interface EvidenceFile {
  result: string;
  endpoints: Array<{
    endpoint_id: string;
    tenant_binding: string | null;
    credential_revision: string;
    hermes: { version: string | null; platform: string | null; read_from: string; problem: string | null };
    offer: { source: string; read_at: string; durable_run_idempotency: { retention_seconds: number | null } | null; run_steer: boolean };
    checks: Array<{ id: string; result: string; reason: string | null; evidence: Record<string, unknown> }>;
  }>;
  [field: string]: unknown;
}

/** Reads DIR/evidence.json and checks it against schemas/qualification/evidence.schema.json. */
export function readEvidence(dir: string): EvidenceFile {
  const evidence = JSON.parse(readFileSync(join(dir, 'evidence.json'), 'utf8')) as EvidenceFile;
  assertMatches('qualification/evidence.schema.json', evidence);
  return evidence;
}

/** The checks of the (only) endpoint, by id. */
export function checksById(evidence: EvidenceFile): Map<string, EvidenceFile['endpoints'][number]['checks'][number]> {
  return new Map((evidence.endpoints[0]?.checks ?? []).map((check) => [check.id, check]));
}

/** One error line on stderr, prefixed, and no stack trace. */
export function expectOneErrorLine(stderr: string, fragment: string | RegExp): void {
  const lines = stderr.trimEnd().split('\n');
  expect(lines, stderr).toHaveLength(1);
  expect(lines[0]).toMatch(/^hermes-aip: /);
  expect(lines[0]).toMatch(fragment);
  expect(stderr).not.toMatch(/\n\s+at /);
}
