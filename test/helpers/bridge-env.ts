/**
 * The Herm bridge end to end: both simulators on loopback, a connector over the Hermes one and
 * a bridge over both, everything closed after each test. Inspection helpers read what each
 * simulator received, never the bridge's internals.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, expect } from 'vitest';
import {
  createHermBridge,
  createHermesConnector,
  createMemoryLedger,
  type HermBridge,
  type HermBridgeOptions,
  type HermesConnector,
  type RunLedger,
} from 'aip-connector-hermes-agent';
import {
  startHermSimulator,
  startHermesSimulator,
  type HermCustomToolUse,
  type HermSimulator,
  type HermSimulatorOptions,
  type HermesSimulator,
  type HermesSimulatorOptions,
  type RunStep,
} from 'aip-connector-hermes-agent/simulator';
import { API_KEY, ENDPOINT, eventually, grantFor, nextId } from './harness.js';

/** The Hermes key is the harness's; the Herm key is a different secret, so a leak in either direction shows. */
export const HERMES_KEY = API_KEY;
export const HERM_KEY = 'herm_sk_test_5f1e2d3c4b5a69788796a5b4';
export { ENDPOINT };
export const TOOL_NAME = 'hermes_run';

/** Small retry and poll delays: tests never wait for production backoff. */
export const FAST_RETRY = { attempts: 6, baseDelayMs: 5, maxDelayMs: 50 } as const;
export const FAST_POLL = { baseDelayMs: 10, maxDelayMs: 50 } as const;

export type BridgeExtras = Partial<Omit<HermBridgeOptions, 'herm' | 'connector' | 'endpointId'>>;

export interface BridgeEnvOptions {
  hermes?: Partial<HermesSimulatorOptions>;
  herm?: Partial<HermSimulatorOptions>;
  /** Shared by the connector and the bridge (default: a fresh memory ledger, closed with the env). */
  ledger?: RunLedger;
  bridge?: BridgeExtras;
}

export interface BridgeEnv {
  hermes: HermesSimulator;
  herm: HermSimulator;
  ledger: RunLedger;
  connector: HermesConnector;
  bridge: HermBridge;
  /** Another connector + bridge over the same simulators (a restarted process), closed with the env. */
  restart(ledger: RunLedger, extras?: BridgeExtras): { connector: HermesConnector; bridge: HermBridge };
  cap(operation: string): string;
  close(): Promise<void>;
}

export function connectorFor(hermes: HermesSimulator, ledger: RunLedger): HermesConnector {
  return createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: hermes.url, apiKey: HERMES_KEY }], ledger });
}

export function bridgeFor(herm: HermSimulator, connector: HermesConnector, ledger: RunLedger, extras: BridgeExtras = {}): HermBridge {
  return createHermBridge({
    herm: { baseUrl: herm.url, apiKey: HERM_KEY },
    connector,
    endpointId: ENDPOINT,
    ledger,
    finalRetry: FAST_RETRY,
    statusPoll: FAST_POLL,
    ...extras,
  });
}

export async function startBridgeEnv(options: BridgeEnvOptions = {}): Promise<BridgeEnv> {
  const hermes = await startHermesSimulator({ apiKey: HERMES_KEY, keepaliveMs: 200, ...options.hermes });
  const herm = await startHermSimulator({ apiKey: HERM_KEY, keepaliveMs: 200, ...options.herm });
  const ownLedger = options.ledger ? undefined : createMemoryLedger();
  const ledger = options.ledger ?? (ownLedger as RunLedger);
  const connector = connectorFor(hermes, ledger);
  const processes: Array<{ connector: HermesConnector; bridge: HermBridge; closeOnce: () => Promise<void> }> = [];
  /** Teardown closes each bridge once, unless the test closed it already (a test may check what a second close() does). */
  const track = (next: { connector: HermesConnector; bridge: HermBridge }) => {
    const close = next.bridge.close.bind(next.bridge);
    let closed = false;
    next.bridge.close = () => {
      closed = true;
      return close();
    };
    processes.push({ ...next, closeOnce: () => (closed ? Promise.resolve() : close()) });
    return next;
  };
  const { bridge } = track({ connector, bridge: bridgeFor(herm, connector, ledger, options.bridge) });
  let closing: Promise<void> | undefined;
  return {
    hermes,
    herm,
    ledger,
    connector,
    bridge,
    restart(nextLedger, extras = {}) {
      const nextConnector = connectorFor(hermes, nextLedger);
      return track({ connector: nextConnector, bridge: bridgeFor(herm, nextConnector, nextLedger, { ...options.bridge, ...extras }) });
    },
    cap: (operation) => `cap:hermes_agent:${ENDPOINT}:${operation}`,
    close() {
      closing ??= (async () => {
        for (const process of processes) {
          await process.closeOnce();
          await process.connector.close();
        }
        await herm.close();
        await hermes.close();
        await ownLedger?.close();
      })();
      return closing;
    },
  };
}

/** startBridgeEnv for one test file: an afterEach closes every env it started. */
export function bridgeEnvFactory(defaults: BridgeEnvOptions = {}): (options?: BridgeEnvOptions) => Promise<BridgeEnv> {
  const started: BridgeEnv[] = [];
  afterEach(async () => {
    await Promise.all(started.splice(0).map((env) => env.close()));
  });
  return async (options = {}) => {
    const env = await startBridgeEnv({
      ...defaults,
      ...options,
      hermes: { ...defaults.hermes, ...options.hermes },
      herm: { ...defaults.herm, ...options.herm },
      bridge: { ...defaults.bridge, ...options.bridge },
    });
    started.push(env);
    return env;
  };
}

export const newSessionId = () => `sesn_${randomBytes(6).toString('hex')}`;

/** The agent calls the bridged tool: a pending custom tool call in Herm, and the event that announces it. */
export function callTool(
  herm: HermSimulator,
  sessionId: string,
  input: { prompt: string; instructions?: string; session_id?: string; sim_script?: RunStep[] },
  toolUseId?: string,
): HermCustomToolUse {
  return herm.emitToolUse(sessionId, { name: TOOL_NAME, input: { ...input }, ...(toolUseId ? { tool_use_id: toolUseId } : {}) });
}

/** One `user.custom_tool_result` as a request carried it, with the request's headers. */
export interface PostedResult {
  tool_use_id: string;
  status: string;
  is_error: boolean;
  text: string;
  headers: Record<string, string | string[] | undefined>;
}

/** Every tool result POSTed to the session's events route (accepted or not), in arrival order. */
export function postedResults(herm: HermSimulator, sessionId: string, toolUseId?: string): PostedResult[] {
  const path = `/v1/sessions/${encodeURIComponent(sessionId)}/events`;
  const posted: PostedResult[] = [];
  for (const request of herm.requests) {
    if (request.method !== 'POST' || request.path !== path) continue;
    const events = (JSON.parse(request.body) as { events: Array<Record<string, unknown>> }).events;
    for (const event of events) {
      if (toolUseId !== undefined && event.tool_use_id !== toolUseId) continue;
      posted.push({
        tool_use_id: event.tool_use_id as string,
        status: event.status as string,
        is_error: event.is_error as boolean,
        text: textOf(event),
        headers: request.headers,
      });
    }
  }
  return posted;
}

/** The POSTed results of one status. */
export const postsOf = (herm: HermSimulator, sessionId: string, toolUseId: string, status: 'running' | 'final') =>
  postedResults(herm, sessionId, toolUseId).filter((posted) => (status === 'running' ? posted.status === 'running' : posted.status !== 'running'));

/** What Herm accepted for one tool call, in order of acceptance. */
export function acceptedFor(herm: HermSimulator, sessionId: string, toolUseId: string): Array<Record<string, unknown>> {
  return herm.accepted(sessionId).filter((event) => event.tool_use_id === toolUseId);
}

export const acceptedFinals = (herm: HermSimulator, sessionId: string, toolUseId: string) =>
  acceptedFor(herm, sessionId, toolUseId).filter((event) => event.status !== 'running');

export const acceptedRunning = (herm: HermSimulator, sessionId: string, toolUseId: string) =>
  acceptedFor(herm, sessionId, toolUseId).filter((event) => event.status === 'running');

/** Exactly one final result accepted for the tool call, and it is a failure (`is_error`); returns its text. */
export function oneFailedFinal(herm: HermSimulator, sessionId: string, toolUseId: string): string {
  const finals = acceptedFinals(herm, sessionId, toolUseId);
  expect(finals).toHaveLength(1);
  expect(finals[0]).toMatchObject({ status: 'failed', is_error: true });
  return textOf(finals[0] as Record<string, unknown>);
}

/** The text of a tool result: its text blocks joined. */
export function textOf(event: Record<string, unknown>): string {
  const content = event.content as Array<{ type: string; text: string }> | undefined;
  return (content ?? []).map((block) => block.text).join('');
}

/** `POST /v1/runs` requests Hermes received, with their parsed bodies. */
export function hermesStarts(hermes: HermesSimulator): Array<{ body: Record<string, unknown>; headers: Record<string, string | string[] | undefined> }> {
  return hermes.requests
    .filter((request) => request.method === 'POST' && request.path === '/v1/runs')
    .map((request) => ({ body: JSON.parse(request.body) as Record<string, unknown>, headers: request.headers }));
}

/** Requests Hermes received for one run, by route: '' (status), '/events', '/approval', '/stop'. */
export function hermesRunRequests(
  hermes: HermesSimulator,
  runId: string,
  suffix: '' | '/events' | '/approval' | '/stop',
  method = suffix === '' || suffix === '/events' ? 'GET' : 'POST',
) {
  const path = `/v1/runs/${runId}${suffix}`;
  return hermes.requests.filter((request) => request.method === method && request.path === path);
}

/** Scripts that keep a run going long enough for a test to act while it runs. */
/** The test, as an operator, answers the run's pending approval through the env's connector. */
export async function approveRun(env: BridgeEnv, runId: string): Promise<void> {
  await eventually(() => env.hermes.run(runId)?.pendingApprovals === 1, 'the run waits for approval', 2000);
  const input = { run_id: runId, choice: 'once' };
  const result = await env.connector.invoke(
    { id: nextId(), capability_id: env.cap('run_approval'), input, idempotency_key: nextId('appr') },
    { approval: grantFor(input) },
  );
  expect(result.status, JSON.stringify(result.error)).toBe('completed');
}

export const scripts = {
  quick: (output = 'Render completed: https://example.com/render/123'): RunStep[] => [
    { type: 'delta', text: 'Rendering' },
    { type: 'delta', text: ' done' },
    { type: 'complete', output },
  ],
  /** Held at an approval that the test answers (approveRun), then completed. */
  approval: (output = 'Render completed after its approval'): RunStep[] => [
    { type: 'delta', text: 'Rendering' },
    { type: 'approval', command: 'upload ./render.mp4', description: 'upload' },
    { type: 'tool', tool: 'terminal' },
    { type: 'complete', output },
  ],
  held: (ms: number, output = 'Render completed after the wait'): RunStep[] => [
    { type: 'delta', text: 'Rendering' },
    { type: 'sleep', ms },
    { type: 'complete', output },
  ],
};
