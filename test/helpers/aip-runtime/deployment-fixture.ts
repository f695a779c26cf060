/**
 * A whole test deployment: the Hermes simulator, the runtime double and one (or more) built
 * `hermes-aip host` processes; `closeDeployments()` in afterEach tears all of it down. Also
 * the actions tests send (capability ids of the simulator's endpoint `local`).
 */
import { startHermesSimulator, type HermesSimulator, type HermesSimulatorOptions } from 'aip-connector-hermes-agent/simulator';
import { hexId } from './deployment.js';
import type { AipAction } from './dispatcher.js';
import { launchHost, stopHosts, type HostProcess, type LaunchOptions } from './launcher.js';
import { startAipRuntime, type AipRuntime } from './runtime.js';

export interface Deployment {
  runtime: AipRuntime;
  simulator: HermesSimulator;
  host: HostProcess;
}

export const HERMES_KEY = 'hk_host_runtime_test_4d1f9c2b';

const opened: Array<{ close(): Promise<void> }> = [];

export async function closeDeployments(): Promise<void> {
  await stopHosts();
  await Promise.all(opened.splice(0).map((part) => part.close()));
}

export async function startSimulator(options: Partial<HermesSimulatorOptions> = {}): Promise<HermesSimulator> {
  const simulator = await startHermesSimulator({ apiKey: HERMES_KEY, keepaliveMs: 200, ...options });
  opened.push(simulator);
  return simulator;
}

export async function startRuntime(leaseTtlMs?: number): Promise<AipRuntime> {
  const runtime = await startAipRuntime(leaseTtlMs === undefined ? {} : { leaseTtlMs });
  opened.push(runtime);
  return runtime;
}

/** A simulator, a runtime and one host that holds a lease and serves (`GET /ready` 200). */
export async function startDeployment(
  options: {
    leaseTtlMs?: number;
    simulator?: Partial<HermesSimulatorOptions>;
    /** Default true; false leaves /ready unasked (its probes would warm up what the test watches). */
    waitReady?: boolean;
  } & Omit<LaunchOptions, 'runtime' | 'hermes'> = {},
): Promise<Deployment> {
  const { leaseTtlMs, simulator: simulatorOptions, waitReady = true, ...launch } = options;
  const simulator = await startSimulator(simulatorOptions);
  const runtime = await startRuntime(leaseTtlMs);
  const host = await launchHost({ runtime, hermes: hermesOf(simulator), ...launch });
  if (waitReady) await waitForReady(host, 200);
  return { runtime, simulator, host };
}

export function hermesOf(simulator: HermesSimulator): LaunchOptions['hermes'] {
  return { url: simulator.url, apiKey: HERMES_KEY };
}

export const capability = (operation: 'run_start' | 'run_status' | 'run_events' | 'run_approval' | 'run_stop') => `cap:hermes_agent:local:${operation}`;

export function runStartAction(input: Record<string, unknown> = { input: 'hello' }, extra: Partial<AipAction> = {}): AipAction {
  return { id: hexId('act_'), capability_id: capability('run_start'), input: { body: input }, idempotency_key: hexId('idem_'), ...extra };
}

export function runAction(operation: 'run_status' | 'run_events' | 'run_stop', runId: string, extra: Partial<AipAction> = {}): AipAction {
  return { id: hexId('act_'), capability_id: capability(operation), input: { run_id: runId }, ...extra };
}

export async function getJson(url: string): Promise<{ status: number; body: any; contentType: string | null }> {
  const response = await fetch(url);
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: response.status, body, contentType: response.headers.get('content-type') };
}

/** Polls `GET /ready` until it answers `status` (a bound only to fail a hung test). */
export async function waitForReady(host: Pick<HostProcess, 'origin'>, status: 200 | 503, timeoutMs = 15_000): Promise<any> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const ready = await getJson(`${host.origin}/ready`);
    if (ready.status === status) return ready.body;
    if (Date.now() > until) throw new Error(`GET /ready stayed ${ready.status} (${JSON.stringify(ready.body)}), waited for ${status}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Requests Hermes received on its run routes (the host's readiness probes of /health left out). */
export function runRequests(simulator: HermesSimulator): number {
  return simulator.requests.filter((request) => request.path.startsWith('/v1/runs')).length;
}
