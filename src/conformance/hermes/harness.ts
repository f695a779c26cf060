import { randomBytes } from 'node:crypto';
import { inspect } from 'node:util';
import { pino, type Logger } from 'pino';
import type {
  AipAction,
  AipActionResult,
  AipStreamChunk,
  ExecutionContext,
  HermesConnector,
  HermesEndpointConfig,
  OperationName,
  RunLedger,
} from '../../index.js';
import { typedId } from '../../internal/ids.js';
import type { Clock, EvidenceSource } from '../kit/types.js';
import type { ProxiedRequest, RecordingProxy } from './proxy.js';
import { capabilityId } from '../../contract/registry.js';
import { TERMINAL_STATUSES } from '../../contract/hermes-vocabulary.js';

/** Builds the connector under test; the kit points it at its recording proxy. */
export type ConnectorFactory = (options: { endpoint: HermesEndpointConfig; ledger?: RunLedger; logger: Logger }) => HermesConnector;

/** Run bodies for `run_start`: prompts for a live Hermes, scripted runs for the simulator. */
export interface RunBodies {
  /** Completes on its own, quickly. */
  harmless(): Record<string, unknown>;
  /** Holds at a provider approval until answered. */
  approval(sessionId: string): Record<string, unknown>;
  /** Stays active long enough to be cancelled or cut. */
  long(): Record<string, unknown>;
}

/** How the kit reaches the provider: a base URL and key (the kit puts its proxy in front), and run bodies. */
export interface ProviderAccess {
  baseUrl: string;
  apiKey: string;
  endpointId: string;
  /** The endpoint's tenant binding; without one the kit binds its own tenant. */
  tenantId?: string;
  displayName?: string;
  source: EvidenceSource;
  bodies: RunBodies;
  /** Each call's deadline. */
  stepTimeoutMs: number;
  /** Pause between two status reads while following a run. */
  pollMs: number;
}

export const KIT_TENANT = 'conformance-tenant-a';
export const OTHER_TENANT = 'conformance-tenant-b';
export const KIT_ACTOR = { principalId: 'agent:conformance-requester', issuer: 'https://identity.conformance.invalid' };
const MUTATIONS: ReadonlySet<OperationName> = new Set(['run_start', 'run_approval', 'run_stop']);

export interface Invocation {
  action: AipAction;
  result: AipActionResult;
  chunks: AipStreamChunk[];
  /** The requests the proxy recorded while this call ran. */
  requests: ProxiedRequest[];
}

export interface InvokeOptions {
  context?: Partial<ExecutionContext>;
  /** Replaces the context entirely (tenant and actor included). */
  rawContext?: ExecutionContext;
  action?: Partial<AipAction>;
  onChunk?: (chunk: AipStreamChunk) => void | Promise<void>;
}

/**
 * The kit's side of every scenario: connectors built against the proxy, calls with a trusted
 * context, and everything they produced (results, chunks, log lines) kept for the secret scans.
 */
export class Harness {
  readonly logLines: string[] = [];
  /** Every result and chunk any connector produced, for the secret scans. */
  readonly produced: unknown[] = [];
  readonly runs = new Map<string, { read: boolean }>();
  readonly tenant: string;
  readonly #connectors: HermesConnector[] = [];
  #keys = 0;

  constructor(
    readonly provider: ProviderAccess,
    readonly proxy: RecordingProxy,
    readonly clock: Clock,
    private readonly factory: ConnectorFactory,
  ) {
    this.tenant = provider.tenantId ?? KIT_TENANT;
  }

  /** A fresh connector under test, tenant-bound, logging at trace level into `logLines`. */
  connector(ledger?: RunLedger): HermesConnector {
    const logger = pino({ level: 'trace' }, { write: (line: string) => void this.logLines.push(line) });
    const endpoint: HermesEndpointConfig = { id: this.provider.endpointId, baseUrl: this.proxy.url, apiKey: this.provider.apiKey, tenantId: this.tenant };
    if (this.provider.displayName !== undefined) endpoint.displayName = this.provider.displayName;
    const connector = this.factory({ endpoint, logger, ...(ledger ? { ledger } : {}) });
    this.#connectors.push(connector);
    return connector;
  }

  cap(operation: OperationName): string {
    return capabilityId(this.provider.endpointId, operation);
  }

  action(operation: OperationName, input: unknown, overrides: Partial<AipAction> = {}): AipAction {
    const action: AipAction = { id: typedId('act_'), capability_id: this.cap(operation), input };
    if (MUTATIONS.has(operation)) action.idempotency_key = `conformance-${typedId('act_')}-${++this.#keys}`;
    return { ...action, ...overrides };
  }

  /** The host's trusted context: verified tenant, authenticated actor, trace, deadline. */
  context(extra: Partial<ExecutionContext> = {}): ExecutionContext {
    return { tenantId: this.tenant, actor: KIT_ACTOR, traceId: kitId('corr_'), deadline: this.clock.now() + this.provider.stepTimeoutMs, ...extra };
  }

  async invoke(connector: HermesConnector, operation: OperationName, input: unknown, options: InvokeOptions = {}): Promise<Invocation> {
    return this.send(connector, this.action(operation, input, options.action), options);
  }

  async send(connector: HermesConnector, action: AipAction, options: InvokeOptions = {}): Promise<Invocation> {
    const chunks: AipStreamChunk[] = [];
    const onChunk = async (chunk: AipStreamChunk) => {
      chunks.push(chunk);
      this.produced.push(chunk);
      await options.onChunk?.(chunk);
    };
    const context = options.rawContext ?? this.context({ ...options.context, onChunk });
    const before = this.proxy.requests.length;
    const result = await connector.invoke(action, context);
    this.produced.push(result);
    return { action, result, chunks, requests: this.proxy.requests.slice(before) };
  }

  /** run_start of a run of this kind; throws when no run id comes back (the scenario cannot go on). */
  async startRun(
    connector: HermesConnector,
    kind: keyof RunBodies,
    options: InvokeOptions & { extraInput?: Record<string, unknown> } = {},
  ): Promise<Invocation & { runId: string }> {
    const body = kind === 'approval' ? this.provider.bodies.approval(kitId('sess_')) : this.provider.bodies[kind]();
    const started = await this.invoke(connector, 'run_start', { body, ...options.extraInput }, options);
    const runId = (started.result.output as { run_id?: unknown } | undefined)?.run_id;
    if (started.result.status !== 'completed' || typeof runId !== 'string') throw new Error(`run_start did not return a run id (${describe(started.result)})`);
    this.runs.set(runId, { read: false });
    return { ...started, runId };
  }

  /** run_events for a run, chunks collected; the run's single event queue counts as read. */
  async readEvents(connector: HermesConnector, runId: string, options: InvokeOptions & { maxEvents?: number; lastSeq?: number } = {}): Promise<Invocation> {
    const run = this.runs.get(runId);
    if (run) run.read = true;
    const input: Record<string, unknown> = { run_id: runId };
    if (options.maxEvents !== undefined) input['max_events'] = options.maxEvents;
    if (options.lastSeq !== undefined) input['last_seq'] = options.lastSeq;
    return this.invoke(connector, 'run_events', input, options);
  }

  async status(connector: HermesConnector, runId: string): Promise<string | undefined> {
    const { result } = await this.invoke(connector, 'run_status', { run_id: runId });
    return result.status === 'completed' ? String((result.output as { status?: unknown }).status) : undefined;
  }

  /** Reads the status until `accept` holds or the step's deadline passes; returns the last status seen. */
  async followStatus(connector: HermesConnector, runId: string, accept: (status: string) => boolean): Promise<string | undefined> {
    const deadline = this.clock.now() + this.provider.stepTimeoutMs;
    for (;;) {
      const status = await this.status(connector, runId);
      if ((status !== undefined && accept(status)) || this.clock.now() + this.provider.pollMs >= deadline) return status;
      await this.clock.sleep(this.provider.pollMs);
    }
  }

  /** True when `text` appears in nothing the connectors produced, logged or published. */
  secretAbsent(text: string, extra: unknown[] = []): boolean {
    const haystack = [...this.logLines, ...[...this.produced, ...extra].map((value) => `${JSON.stringify(value)}\n${inspect(value, { depth: 12 })}`)];
    return haystack.every((item) => !item.includes(text));
  }

  /** Leaves the provider as found: active runs stopped, unread event queues drained; then closes every connector. */
  async cleanUp(): Promise<void> {
    const connector = this.connector();
    for (const [runId, run] of this.runs) {
      const status = await this.status(connector, runId);
      if (status !== undefined && !TERMINAL_STATUSES.has(status)) await connector.cancel(this.action('run_events', { run_id: runId }), this.context());
      if (!run.read) await this.readEvents(connector, runId);
    }
    await Promise.allSettled(this.#connectors.map((each) => each.close()));
  }
}

/** A typed id of the kit's own (trace, session, approval): prefix + 32 hex. */
export function kitId(prefix: 'corr_' | 'sess_' | 'appr_'): string {
  return `${prefix}${randomBytes(16).toString('hex')}`;
}

/** `code` or status of a result, for reasons; connector messages never carry keys or provider bodies. */
export function describe(result: AipActionResult): string {
  return result.error ? result.error.code : `status ${result.status}`;
}

/** The short form of an error code: `connector.hermes_agent.not_found` → `not_found`. */
export function codeOf(result: AipActionResult): string | undefined {
  return result.error?.code.replace(/^connector\.hermes_agent\./, '');
}

export function outcome(passed: boolean, reason: string): { passed: boolean; reason: string } {
  return { passed, reason };
}
