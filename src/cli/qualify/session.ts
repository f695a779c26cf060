import { randomBytes } from 'node:crypto';
import type { AipAction, AipActionResult, ApprovalGrant, ExecutionContext, HermesConnector, OperationName, RunLedger } from '../../index.js';
import { typedId } from '../../internal/ids.js';
import type { LoadedEndpoint } from '../config.js';
import { duration } from '../format.js';
import { CheckFailed } from './check-failed.js';
import { TERMINAL_STATUSES } from '../../contract/hermes-vocabulary.js';
import { capabilityId } from '../../contract/registry.js';
import { errorCode } from '../../failures.js';

/** Run bodies for the simulator: `sim_script` makes every run deterministic (a real Hermes ignores the field). */
export interface SimulatorScripts {
  harmless: unknown[];
  /** Must hold at its approval until answered. */
  approval: unknown[];
  /** Stays active long enough to be stopped or cut. */
  long: unknown[];
}

export interface QualifySettings {
  qualificationId: string;
  /** Each check's own deadline. */
  stepTimeoutMs: number;
  /** Pause between two status reads while following a run. */
  pollMs: number;
  /**
   * How long a run that should ask for approval may stay without a single event before the check
   * fails it as stuck; a second run of a session silent for half of it is waiting for its turn.
   */
  silentRunMs: number;
  approvalPrompt: string;
  harmlessPrompt: string;
  /** Present only against the embedded simulator. */
  scripts?: SimulatorScripts;
  /** SIGINT/SIGTERM: every call in flight is cancelled. */
  signal: AbortSignal;
  /** Against the embedded simulator: how many requests it has received, to show that a refusal sent nothing. */
  providerRequestCount?: () => number;
  /** Against the embedded simulator at the pin: a provider restart, after which Hermes knows none of its runs. */
  restartProvider?: () => void;
  /** The connector keeps a run event journal: run_events reads it, so a second reader is not answered 404 but resumes. */
  journal?: boolean;
}

const MUTATIONS: ReadonlySet<OperationName> = new Set(['run_start', 'run_approval', 'run_stop']);

export type RunKind = 'harmless' | 'approval' | 'long';

/** A run this qualification started; `stream` says whether its single event queue was already read. */
export interface TrackedRun {
  readonly id: string;
  readonly startedBy: string;
  stream: 'unread' | 'read' | 'disconnected';
}

export interface StatusFollow {
  status: Record<string, unknown>;
  /** Each distinct status value in the order seen. */
  seen: string[];
}

/**
 * One endpoint's qualification: its connector calls, every one with a deadline (the current
 * check's), the runs it started (for cleanup), and what one check hands to the next.
 */
export class EndpointSession {
  readonly runs = new Map<string, TrackedRun>();
  /** The approval run left waiting by `isolated_approvals`, for `approval_requires_evidence`. */
  handOver: { sessionId?: string; waitingRunId?: string } = {};
  /** The deadline of the check that is running (epoch ms). */
  deadline = 0;
  /** Cancels every call; cleanup runs without it so that an interrupt still stops what was started. */
  signal: AbortSignal | undefined;
  checkId = '';
  #keys = 0;

  constructor(
    readonly endpoint: LoadedEndpoint['config'],
    readonly connector: HermesConnector,
    /** The connector's own run ledger. */
    readonly ledger: RunLedger,
    readonly settings: QualifySettings,
    /** Run ids started on any endpoint of this qualification: a start must never repeat one. */
    private readonly allRunIds: Set<string>,
  ) {
    this.signal = settings.signal;
  }

  cap(operation: OperationName): string {
    return capabilityId(this.endpoint.id, operation);
  }

  /** The trusted context the qualification acts in: the endpoint's bound tenant, if any. */
  context(extra: Partial<ExecutionContext> = {}): ExecutionContext {
    const context: ExecutionContext = {
      actor: { principalId: 'hermes-aip-qualify' },
      traceId: this.settings.qualificationId,
      deadline: this.deadline,
      ...extra,
    };
    const signals = [this.signal, extra.signal].filter((signal): signal is AbortSignal => signal !== undefined);
    const [only, ...more] = signals;
    if (only) context.signal = more.length === 0 ? only : AbortSignal.any(signals);
    if (this.endpoint.tenantId !== undefined) context.tenantId = this.endpoint.tenantId;
    return context;
  }

  /** One connector invocation; mutating operations get a fresh idempotency key. */
  invoke(operation: OperationName, input: unknown, extra: Partial<ExecutionContext> = {}): Promise<AipActionResult> {
    return this.send(this.actionFor(operation, input), extra);
  }

  actionFor(operation: OperationName, input: unknown): AipAction {
    const action: AipAction = { id: typedId('act_'), capability_id: this.cap(operation), input };
    if (MUTATIONS.has(operation)) action.idempotency_key = this.idempotencyKey();
    return action;
  }

  send(action: AipAction, extra: Partial<ExecutionContext> = {}): Promise<AipActionResult> {
    return this.connector.invoke(action, this.context(extra));
  }

  idempotencyKey(): string {
    return `hermes-aip-qualify-${this.settings.qualificationId}-${this.endpoint.id}-${++this.#keys}`;
  }

  /**
   * The body of a run of this kind: the configured prompt, plus a script against the simulator. A
   * real Hermes has no "long" prompt: a run held at its approval is what stays active there.
   */
  body(kind: RunKind, sessionId?: string): Record<string, unknown> {
    const { scripts } = this.settings;
    const harmless = kind === 'harmless' || (kind === 'long' && scripts !== undefined);
    const input = harmless ? this.settings.harmlessPrompt : this.settings.approvalPrompt;
    const body: Record<string, unknown> = { input };
    if (sessionId !== undefined) body['session_id'] = sessionId;
    if (scripts) body['sim_script'] = scripts[kind];
    return body;
  }

  /** run_start; fails the check unless Hermes answers with a run id this qualification has not seen. */
  async startRun(kind: RunKind, sessionId?: string): Promise<{ runId: string; result: AipActionResult; action: AipAction }> {
    const action = this.actionFor('run_start', { body: this.body(kind, sessionId) });
    const result = await this.send(action);
    const runId = (result.output as { run_id?: unknown } | undefined)?.run_id;
    if (result.status !== 'completed' || typeof runId !== 'string' || runId === '') {
      throw new CheckFailed(`run_start did not return a run id: ${describeResult(result)}`);
    }
    if (this.allRunIds.has(runId)) throw new CheckFailed(`run_start returned run id ${runId}, which an earlier start of this qualification already returned`);
    this.allRunIds.add(runId);
    this.runs.set(runId, { id: runId, startedBy: this.checkId, stream: 'unread' });
    return { runId, result, action };
  }

  /** run_status (by the check's deadline unless given another); fails the check when the status cannot be read. */
  async readStatus(runId: string, deadline?: number): Promise<Record<string, unknown>> {
    const result = await this.invoke('run_status', { run_id: runId }, deadline === undefined ? {} : { deadline });
    if (result.status !== 'completed') throw new CheckFailed(`run_status of ${runId} failed: ${describeResult(result)}`);
    return result.output as Record<string, unknown>;
  }

  /**
   * Reads the status until `accept` holds, until the run ends without it (when `failOnTerminal`), or
   * until the check's deadline. `onEach` may throw CheckFailed to stop early.
   */
  async followStatus(
    runId: string,
    accept: (status: string, record: Record<string, unknown>) => boolean,
    what: string,
    options: { failOnTerminal?: boolean; onEach?: () => Promise<void> } = {},
  ): Promise<StatusFollow> {
    const seen: string[] = [];
    for (;;) {
      const status = await this.readStatusBeforeDeadline(runId, what, seen);
      const value = String(status['status']);
      if (seen[seen.length - 1] !== value) seen.push(value);
      if (accept(value, status)) return { status, seen };
      if (options.failOnTerminal && TERMINAL_STATUSES.has(value)) {
        throw new CheckFailed(`run ${runId} ended as ${value} before ${what} (statuses seen: ${seen.join(' → ')})`);
      }
      await options.onEach?.();
      if (Date.now() + this.settings.pollMs >= this.deadline) {
        throw new CheckFailed(`run ${runId} did not reach ${what} within ${duration(this.settings.stepTimeoutMs)} (statuses seen: ${seen.join(' → ')})`);
      }
      await pause(this.settings.pollMs, this.settings.signal);
    }
  }

  private async readStatusBeforeDeadline(runId: string, what: string, seen: string[]): Promise<Record<string, unknown>> {
    const result = await this.invoke('run_status', { run_id: runId });
    if (result.status === 'completed') return result.output as Record<string, unknown>;
    if (result.error?.code === errorCode('deadline_exceeded')) {
      throw new CheckFailed(
        `run ${runId} did not reach ${what} within ${duration(this.settings.stepTimeoutMs)} (statuses seen: ${seen.join(' → ') || 'none'})`,
      );
    }
    throw new CheckFailed(`run_status of ${runId} failed while waiting for ${what}: ${describeResult(result)}`);
  }

  /** An AIP approval grant for exactly this input, valid for ten minutes. */
  grantFor(input: unknown, overrides: Partial<ApprovalGrant> = {}): ApprovalGrant {
    const now = Date.now();
    return {
      approvalId: `appr_qualify_${randomBytes(12).toString('hex')}`,
      decision: 'approved',
      grantedAt: now,
      expiresAt: now + 10 * 60_000,
      evidence: {
        reason: `hermes-aip qualification ${this.settings.qualificationId}, check ${this.checkId}`,
        inputSnapshot: structuredClone(input),
        policyDecision: { policy: 'hermes-aip-qualify', outcome: 'allow', check: this.checkId },
      },
      ...overrides,
    };
  }
}

/** `code (message)` of a failed result, or its status; connector messages never carry provider bodies or keys. */
export function describeResult(result: AipActionResult): string {
  if (!result.error) return `status ${result.status}`;
  return `${result.error.code} (${result.error.message})`;
}

/** The retained shape of a result: status, code, HTTP status, whether it reached Hermes. */
export function resultEvidence(result: AipActionResult): Record<string, unknown> {
  const evidence: Record<string, unknown> = { status: result.status, dispatched: result.receipt !== undefined };
  const httpStatus = result.receipt?.http_status ?? result.error?.details?.remote_status;
  if (httpStatus !== undefined) evidence['http_status'] = httpStatus;
  if (result.error) {
    evidence['code'] = result.error.code;
    if (result.error.details?.provider_code !== undefined) evidence['provider_code'] = result.error.details.provider_code;
  }
  return evidence;
}

/** Waits `ms`, or less when the signal aborts. */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
