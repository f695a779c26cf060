import { afterEach, expect } from 'vitest';
import {
  createHermesConnector,
  type AipAction,
  type AipActionResult,
  type AipStreamChunk,
  type ApprovalGrant,
  type ExecutionContext,
  type HermesConnector,
  type HermesConnectorOptions,
  type HermesEndpointConfig,
} from 'aip-connector-hermes-agent';
import { startHermesSimulator, type HermesSimulator, type HermesSimulatorOptions } from 'aip-connector-hermes-agent/simulator';
import { assertMatches } from './schema-check.js';

export const API_KEY = 'hk_test_key_0123456789abcdef';
export const ENDPOINT = 'local';

/** A connector whose every result and stream chunk is checked against schemas/ and the streaming rules. */
export interface CheckedConnector {
  connector: HermesConnector;
  /** Chunks published to onChunk, per action id, in arrival order. */
  chunks: Map<string, AipStreamChunk[]>;
  cap(operation: string): string;
  /** connector.invoke, with every result and chunk checked against schemas/ and the streaming rules. */
  invoke(action: Partial<AipAction> & { capability_id: string; input: unknown }, context?: ExecutionContext): Promise<AipActionResult>;
  cancel(action: Partial<AipAction> & { capability_id: string; input: unknown }, context?: ExecutionContext): Promise<AipActionResult | null>;
  /** run_start with a scripted body; returns the run id (fails the test otherwise). */
  startRun(body: Record<string, unknown>, extra?: { session_key?: string; context?: ExecutionContext }): Promise<string>;
}

export interface Harness extends CheckedConnector {
  sim: HermesSimulator;
  close(): Promise<void>;
}

export interface HarnessOptions {
  simulator?: Partial<HermesSimulatorOptions>;
  endpoint?: Partial<HermesEndpointConfig>;
  connector?: Partial<Omit<HermesConnectorOptions, 'endpoints'>>;
}

let counter = 0;
export const nextId = (prefix = 'act') => `${prefix}_${process.pid}_${++counter}`;

export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const sim = await startHermesSimulator({ apiKey: API_KEY, keepaliveMs: 200, ...options.simulator });
  const checked = checkedConnector(
    createHermesConnector({
      endpoints: [{ id: ENDPOINT, baseUrl: sim.url, apiKey: API_KEY, ...options.endpoint }],
      ...options.connector,
    }),
  );
  return {
    ...checked,
    sim,
    async close() {
      await checked.connector.close();
      await sim.close();
    },
  };
}

/** Wraps a connector whose endpoint id is ENDPOINT so that every call is checked. */
export function checkedConnector(connector: HermesConnector): CheckedConnector {
  const chunks = new Map<string, AipStreamChunk[]>();
  const cap = (operation: string) => `cap:hermes_agent:${ENDPOINT}:${operation}`;

  const withChunkCheck = (actionId: string, context: ExecutionContext | undefined): ExecutionContext => {
    const seen: AipStreamChunk[] = [];
    chunks.set(actionId, seen);
    return {
      ...context,
      onChunk: async (chunk) => {
        assertMatches('aip/stream-chunk.schema.json', chunk);
        seen.push(chunk);
        await context?.onChunk?.(chunk);
      },
    };
  };

  const checked = async (
    call: (action: AipAction, context: ExecutionContext) => Promise<AipActionResult | null>,
    partial: Partial<AipAction> & { capability_id: string; input: unknown },
    context: ExecutionContext | undefined,
    mode: 'invoke' | 'cancel',
  ): Promise<AipActionResult | null> => {
    const action = { id: nextId(), ...partial } as AipAction;
    // cancel() answers with a run_stop result, which streams nothing.
    const streaming = mode === 'invoke' && action.capability_id.endsWith(':run_events');
    const result = await call(action, streaming ? withChunkCheck(action.id, context) : (context ?? {}));
    if (result === null) return null;
    assertMatches('aip/action-result.schema.json', result);
    expect(result.action_id).toBe(action.id);
    // Once the capability is resolved and the action and context are well-formed, every run_events call ends with one final chunk.
    const refusedBeforeStreaming = /^The (action|execution context) is invalid/.test(result.error?.message ?? '');
    if (streaming && connector.capability(action.capability_id) && !refusedBeforeStreaming) {
      assertStreamShape(chunks.get(action.id) ?? [], result);
    }
    if (result.output !== undefined && action.capability_id.startsWith('cap:hermes_agent:')) {
      const operation = mode === 'cancel' ? 'run_stop' : action.capability_id.slice(action.capability_id.lastIndexOf(':') + 1);
      if (result.status === 'completed' || operation === 'run_events') assertMatches(`operations/${operation}.output.schema.json`, result.output);
    }
    return result;
  };

  const wrapped: CheckedConnector = {
    connector,
    chunks,
    cap,
    invoke: async (action, context) => (await checked((a, c) => connector.invoke(a, c), action, context, 'invoke')) as AipActionResult,
    cancel: (action, context) => checked((a, c) => connector.cancel(a, c), action, context, 'cancel'),
    async startRun(body, extra = {}) {
      const input: Record<string, unknown> = { body };
      if (extra.session_key !== undefined) input.session_key = extra.session_key;
      const result = await wrapped.invoke({ capability_id: cap('run_start'), input, idempotency_key: nextId('key') }, extra.context);
      expect(result.status, JSON.stringify(result.error)).toBe('completed');
      return (result.output as { run_id: string }).run_id;
    },
  };
  return wrapped;
}

/**
 * A harness starter for one test file: each call merges `defaults` under its options, and an
 * afterEach closes every harness it started.
 */
export function harnessFactory(defaults: HarnessOptions = {}): (options?: HarnessOptions) => Promise<Harness> {
  const started: Harness[] = [];
  afterEach(async () => {
    await Promise.all(started.splice(0).map((harness) => harness.close()));
  });
  return async (options = {}) => {
    const harness = await startHarness({ ...defaults, ...options, simulator: { ...defaults.simulator, ...options.simulator } });
    started.push(harness);
    return harness;
  };
}

/** Sequences 0.. without gaps, and exactly one final chunk (done or error), last. */
export function assertStreamShape(chunks: AipStreamChunk[], result: AipActionResult): void {
  expect(chunks.map((chunk) => chunk.sequence)).toEqual(chunks.map((_, index) => index));
  const finals = chunks.filter((chunk) => chunk.kind === 'done' || chunk.kind === 'error');
  expect(finals, `final chunks of ${result.status}`).toHaveLength(1);
  expect(chunks[chunks.length - 1]).toBe(finals[0]);
  for (const chunk of chunks) expect(chunk.action_id).toBe(result.action_id);
}

/** A valid AIP approval grant for exactly this input. */
export function grantFor(input: unknown, overrides: Partial<ApprovalGrant> = {}, now = Date.now()): ApprovalGrant {
  return {
    approvalId: nextId('appr'),
    decision: 'approved',
    grantedAt: now - 1000,
    expiresAt: now + 10 * 60_000,
    evidence: { reason: 'reviewed by the on-call operator', inputSnapshot: structuredClone(input), policyDecision: { policy: 'test', outcome: 'allow' } },
    ...overrides,
  };
}

/** Polls until `check` returns a value (not a timing assertion: bounded only to fail a hung test). */
export async function eventually<T>(check: () => T | undefined | Promise<T | undefined>, what: string, attempts = 400): Promise<T> {
  for (let attempt = 0; attempt < attempts; attempt++) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`never happened: ${what}`);
}

/** Scripts for the simulator, through the body field the simulator reads (real Hermes ignores it). */
export const script = {
  approval: (command = 'rm -rf ./scratch') => [
    { type: 'delta', text: 'Checking ' },
    { type: 'approval', command, pattern_key: 'recursive delete', description: 'recursive delete' },
    { type: 'tool', tool: 'terminal', preview: command },
    { type: 'delta', text: 'done' },
    { type: 'complete', output: 'Removed.' },
  ],
  long: (ms = 60_000) => [
    { type: 'delta', text: 'working' },
    { type: 'sleep', ms },
    { type: 'complete', output: 'late' },
  ],
  quick: (output = 'Hello world') => [
    { type: 'delta', text: 'Hello' },
    { type: 'delta', text: ' world' },
    { type: 'complete', output },
  ],
};
