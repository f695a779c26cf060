/**
 * Shared pieces of the hostile-input and fault suites: a connector pointed at a fault
 * server (both closed after each test), result checks against schemas/, and small
 * helpers to build valid actions and approval grants.
 */
import { afterEach, expect } from 'vitest';
import {
  createHermesConnector,
  type AipActionResult,
  type AipStreamChunk,
  type ExecutionContext,
  type HermesConnector,
  type HermesConnectorOptions,
} from 'aip-connector-hermes-agent';
import { startFaultServer, type FaultHandler, type FaultServer } from '../helpers/fault-server.js';
import { grantFor, nextId } from '../helpers/harness.js';
import { assertMatches } from '../helpers/schema-check.js';

export const PREFIX = 'connector.hermes_agent.';
export const ENDPOINT = 'hostile';
export const HOSTILE_KEY = 'hk_hostile_key_0123456789abcdef';
export const OPERATIONS = ['run_start', 'run_status', 'run_events', 'run_approval', 'run_stop'] as const;
export type Operation = (typeof OPERATIONS)[number];
export const MUTATIONS: readonly Operation[] = ['run_start', 'run_approval', 'run_stop'];

export const cap = (operation: string, endpoint = ENDPOINT) => `cap:hermes_agent:${endpoint}:${operation}`;

export { grantFor, nextId };

export interface Rig {
  server: FaultServer;
  connector: HermesConnector;
  /** Requests the server received since the rig started. */
  requests(): number;
}

export type ConnectorExtras = Partial<Omit<HermesConnectorOptions, 'endpoints'>> & { tenantId?: string; apiKey?: string };

/**
 * A rig factory for one test file: every fault server, extra server and connector it makes is
 * closed in afterEach (connector first, so its sockets go before the servers).
 */
export function rigFactory(): { rig(handler?: FaultHandler, extras?: ConnectorExtras): Promise<Rig>; server(handler?: FaultHandler): Promise<FaultServer> } {
  const connectors: HermesConnector[] = [];
  const servers: FaultServer[] = [];
  afterEach(async () => {
    await Promise.all(connectors.splice(0).map((connector) => connector.close()));
    await Promise.all(servers.splice(0).map((server) => server.close()));
  });
  const server = async (handler?: FaultHandler) => {
    const started = await startFaultServer(handler);
    servers.push(started);
    return started;
  };
  return {
    server,
    async rig(handler, extras = {}) {
      const started = await server(handler);
      const { tenantId, apiKey = HOSTILE_KEY, ...options } = extras;
      const connector = createHermesConnector({
        endpoints: [{ id: ENDPOINT, baseUrl: started.url, apiKey, ...(tenantId === undefined ? {} : { tenantId }) }],
        ...options,
      });
      connectors.push(connector);
      return { server: started, connector, requests: () => started.requests.length };
    },
  };
}

/** A valid input for each operation. */
export function validInput(operation: Operation, runId = `run_${'a'.repeat(32)}`): Record<string, unknown> {
  switch (operation) {
    case 'run_start':
      return { body: { input: 'hello' } };
    case 'run_approval':
      return { run_id: runId, choice: 'once' };
    default:
      return { run_id: runId };
  }
}

/** Invokes `operation` with a valid envelope (key and grant where needed) and the given extra context. */
export function invokeValid(
  connector: HermesConnector,
  operation: Operation,
  options: { input?: Record<string, unknown>; context?: ExecutionContext; chunks?: AipStreamChunk[] } = {},
): Promise<AipActionResult> {
  const input = options.input ?? validInput(operation);
  const context: ExecutionContext = { ...options.context };
  if (operation === 'run_approval' || operation === 'run_stop') context.approval ??= grantFor(input);
  if (options.chunks) {
    const seen = options.chunks;
    const outer = context.onChunk;
    context.onChunk = async (chunk) => {
      assertMatches('aip/stream-chunk.schema.json', chunk);
      seen.push(chunk);
      await outer?.(chunk);
    };
  }
  const action = { id: nextId(), capability_id: cap(operation), input, ...(MUTATIONS.includes(operation) ? { idempotency_key: nextId('key') } : {}) };
  return connector.invoke(action, context);
}

export interface ExpectedError {
  code: string;
  status?: AipActionResult['status'];
  category?: string;
  retryable: boolean;
  uncertain: boolean;
  remote_status?: number;
}

/** The result is schema-valid and carries exactly this error. */
export function expectError(result: AipActionResult, expected: ExpectedError): void {
  assertMatches('aip/action-result.schema.json', result);
  expect(result.status, JSON.stringify(result.error)).toBe(expected.status ?? (expected.code === 'cancelled' ? 'cancelled' : 'failed'));
  expect({
    code: result.error?.code,
    retryable: result.error?.retryable,
    uncertain: result.error?.details?.uncertain_outcome,
    ...(expected.category === undefined ? {} : { category: result.error?.category }),
    ...('remote_status' in expected ? { remote_status: result.error?.details?.remote_status } : {}),
  }).toEqual({
    code: PREFIX + expected.code,
    retryable: expected.retryable,
    uncertain: expected.uncertain,
    ...(expected.category === undefined ? {} : { category: expected.category }),
    ...('remote_status' in expected ? { remote_status: expected.remote_status } : {}),
  });
}

/** Sequences 0.. without gaps, and exactly one final chunk (done or error), last. */
export function expectOneFinalChunk(chunks: AipStreamChunk[], final: 'done' | 'error'): void {
  expect(chunks.map((chunk) => chunk.sequence)).toEqual(chunks.map((_, index) => index));
  const finals = chunks.filter((chunk) => chunk.kind === 'done' || chunk.kind === 'error');
  expect(finals.map((chunk) => chunk.kind)).toEqual([final]);
  expect(chunks.at(-1)).toBe(finals[0]);
}

/** Object.prototype's own keys, to prove that no input polluted it. */
export function prototypeKeys(): string[] {
  return Object.getOwnPropertyNames(Object.prototype).sort();
}
