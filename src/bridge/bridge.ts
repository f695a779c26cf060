import { createHash, randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import { ConnectorConfigError, isRunLedger, resolveTelemetry } from '../config.js';
import { isStorableId, typedId } from '../internal/ids.js';
import { createMemoryLedger } from '../ledger/memory.js';
import { TERMINAL_STATUSES } from '../contract/hermes-vocabulary.js';
import type { BridgeJob, BridgeJobPatch, RunLedger } from '../ledger/types.js';
import { connectorLogger, errorName } from '../internal/logger.js';
import { Secret } from '../internal/secret.js';
import type {
  AipActionResult,
  AipStreamChunk,
  ApprovalGrant,
  ExecutionContext,
  HermesConnector,
  HermesSseEvent,
  OperationName,
  RunEventsOutput,
} from '../types.js';
import { HermClient, type PostOutcome, type ToolResultEvent } from './herm-client.js';
import { type HermStreamError, subscribeToSession } from './session-stream.js';
import { capabilityId } from '../contract/registry.js';
import { errorCode } from '../failures.js';
import { contextWith, endSpan, Telemetry } from '../telemetry.js';
import { context as otelContext, type MeterProvider, type TracerProvider } from '@opentelemetry/api';

export interface HermToolUseEvent {
  type: 'agent.custom_tool_use';
  id?: string;
  tool_use_id: string;
  name: string;
  input: Record<string, unknown>;
}

export interface HermApprovalRequest {
  sessionId: string;
  toolUseId: string;
  runId: string;
  /** The Hermes `approval.request` event: command, pattern_key(s), description, choices. */
  event: Record<string, unknown>;
}

/** An answer to a Hermes approval: the provider choice and the AIP grant that authorizes sending it (its inputSnapshot must be `{ run_id, choice }`). */
export interface HermApprovalDecision {
  choice: 'once' | 'session' | 'always' | 'deny';
  grant: ApprovalGrant;
}

export interface HermBridgeOptions {
  herm: { baseUrl: string; apiKey: string; dispatcher?: Dispatcher };
  connector: HermesConnector;
  /** The configured Hermes endpoint that runs the work. */
  endpointId: string;
  /** Where job records live (default: in memory). Use the connector's durable ledger to recover after a restart. */
  ledger?: RunLedger;
  logger?: Logger;
  onApproval?: (request: HermApprovalRequest) => HermApprovalDecision | null | undefined | Promise<HermApprovalDecision | null | undefined>;
  /** The trusted execution context for the bridge's own actions (tenant, actor). */
  context?: Pick<ExecutionContext, 'tenantId' | 'actor' | 'traceId' | 'sessionId'>;
  /** The Herm session event stream route for subscribe(); `{session_id}` is replaced. */
  streamRoute?: string;
  /** Final-result retries (default 8 attempts, 250 ms doubling to 10 s). */
  finalRetry?: { attempts?: number; baseDelayMs?: number; maxDelayMs?: number };
  /** Status polling after a stream ends without a terminal event (default 500 ms doubling to 15 s). */
  statusPoll?: { baseDelayMs?: number; maxDelayMs?: number };
  /** How long one run is followed before the bridge reports it as not finished (default 6 h). */
  maxRunMs?: number;
  /**
   * How long onApproval may take to answer one approval request (default 300 s, Hermes' own approval
   * timeout `approvals.gateway_timeout`; never past the job's maxRunMs). Unanswered by then: nothing
   * is approved, a late answer is dropped, and the job's final result is `failed`.
   */
  approvalTimeoutMs?: number;
  /**
   * This bridge's identity as the owner of the jobs it drives (default: random per process). A
   * replica that keeps its id across restarts takes its unfinished jobs back at once; another
   * bridge's jobs are taken over only once their lease has expired.
   */
  bridgeId?: string;
  /** How long a job stays with its bridge without a renewal (default 30 s, renewed every third of it). */
  jobLeaseMs?: number;
  /** OpenTelemetry providers for the bridge's spans and `herm.bridge.jobs` (default: the global ones). */
  tracerProvider?: TracerProvider;
  meterProvider?: MeterProvider;
}

export interface HermBridge {
  /** Handles one Herm event; `agent.custom_tool_use` starts (once) a Hermes run. Resolves once the kickoff is settled. */
  handleEvent(sessionId: string, event: unknown): Promise<BridgeJob | null>;
  /**
   * Reads a Herm session's event stream and handles its tool calls until `signal` aborts, the
   * bridge closes or the stream ends. Never rejects: a stream that cannot be opened or read, or a
   * tool call that cannot be handled, ends the subscription and goes to `onError` (or, without
   * one, to the logger), so `void bridge.subscribe(…)` cannot crash the host.
   */
  subscribe(sessionId: string, options?: { signal?: AbortSignal; onError?: (error: Error) => void }): Promise<void>;
  /** Resolves when every job this bridge started has posted its final result or stopped trying. */
  idle(): Promise<void>;
  /**
   * After a restart: resumes every job whose final result was not accepted. Jobs another live
   * bridge holds are left to it and taken over only if its lease expires; idle() waits for those too.
   */
  recover(): Promise<void>;
  close(): Promise<void>;
}

/** The outcome a final result reports. */
interface Finale {
  status: 'completed' | 'failed';
  text: string;
}

const DEFAULT_STREAM_ROUTE = '/v1/sessions/{session_id}/stream';
const DEFAULT_JOB_LEASE_MS = 30_000;
/** Hermes' default `approvals.gateway_timeout`: after it Hermes has denied the command, so an answer is of no use. */
const DEFAULT_APPROVAL_TIMEOUT_MS = 300_000;
const MIN_TAKEOVER_WAIT_MS = 100;

/**
 * The long-running tool pattern: a Herm agent's custom tool call becomes one governed Hermes
 * run. The bridge answers `running` at once, follows the run to its end, and posts the final
 * result with the same tool_use_id; every step is recorded so a restart resumes it.
 */
export function createHermBridge(options: HermBridgeOptions): HermBridge {
  const settings = resolveBridgeOptions(options);
  const { connector, endpointId } = settings;
  const ledger = options.ledger ?? createMemoryLedger();
  const logger = connectorLogger(options.logger).child({ component: 'herm-bridge' });
  const herm = new HermClient(settings.origin, settings.apiKey, options.herm.dispatcher);
  const closing = new AbortController();
  // Every call in flight (of every job, approval and subscription) listens to it until it settles: many listeners, no leak.
  setMaxListeners(0, closing.signal);
  const active = new Map<string, Promise<void>>();
  const approvals = new Set<Promise<void>>();
  /** Jobs held by other bridges that recover() waits to take over. */
  const takeovers = new Set<Promise<void>>();
  const { bridgeId, jobLeaseMs } = settings;
  /** Jobs, like the runs they start, belong to the bridge's verified tenant. */
  const tenantId = options.context?.tenantId ?? null;
  let closed: Promise<void> | undefined;
  const now = () => Date.now();
  const cap = (operation: OperationName) => capabilityId(endpointId, operation);
  const context = (extra: Partial<ExecutionContext> = {}): ExecutionContext => ({ ...options.context, signal: closing.signal, ...extra });
  const telemetry = new Telemetry(settings.telemetry);
  const countJob = (state: BridgeJob['state'], delta: 1 | -1) => telemetry.bridgeJobs.add(delta, { state });
  const update = (job: BridgeJob, patch: Omit<BridgeJobPatch, 'updated_at'>) => {
    if (patch.state !== undefined && patch.state !== job.state && active.has(jobKeyOf(job))) {
      countJob(job.state, -1);
      countJob(patch.state, 1);
    }
    Object.assign(job, patch, { updated_at: now() });
    return ledger.updateJob(job.session_id, job.tool_use_id, { ...patch, updated_at: job.updated_at }, tenantId);
  };
  /** A bridge step in its own span (`herm.bridge <step>`); the connector's invocations inside it are its children. */
  const traced = <T>(step: string, job: BridgeJob, work: () => Promise<T>): Promise<T> => {
    const attributes = {
      'herm.tool_use_id': job.tool_use_id,
      'herm.tool_name': job.tool_name,
      ...(job.run_id === null ? {} : { 'hermes.run_id': job.run_id }),
    };
    const span = telemetry.startInternal(`herm.bridge ${step}`, undefined, attributes);
    return otelContext.with(contextWith(span), work).then(
      (value) => {
        endSpan(span, undefined);
        return value;
      },
      (error: unknown) => {
        endSpan(span, errorName(error));
        throw error;
      },
    );
  };

  /** Runs a job's remaining steps once per process, whatever asks for it, holding its lease meanwhile. */
  const drive = (job: BridgeJob, steps: (job: BridgeJob) => Promise<void>): Promise<void> => {
    const key = jobKeyOf(job);
    const running = active.get(key);
    if (running) return running;
    const lease = holdLease(job);
    countJob(job.state, 1);
    const work = steps(job)
      .catch((error: unknown) => logger.error({ session_id: job.session_id, tool_use_id: job.tool_use_id, err: errorName(error) }, 'herm job stopped'))
      .then(() => lease.release())
      .finally(() => {
        countJob(job.state, -1);
        active.delete(key);
      });
    active.set(key, work);
    return work;
  };

  /** Renews the job's lease while it is driven; an unfinished job's lease is given up at the end, so any bridge's recover() may take it. */
  function holdLease(job: BridgeJob): { release(): Promise<void> } {
    const where = { session_id: job.session_id, tool_use_id: job.tool_use_id };
    const renew = () =>
      ledger.renewJobLease(job.session_id, job.tool_use_id, bridgeId, now() + jobLeaseMs, tenantId).then(
        (held) => held || logger.warn(where, 'herm job lease lost: another bridge may have taken the job over'),
        (error: unknown) => logger.error({ ...where, err: errorName(error) }, 'herm job lease renewal failed'),
      );
    const timer = setInterval(renew, Math.max(1, Math.floor(jobLeaseMs / 3)));
    timer.unref();
    return {
      async release() {
        clearInterval(timer);
        if (job.state === 'done') return;
        await ledger.renewJobLease(job.session_id, job.tool_use_id, bridgeId, now(), tenantId).catch(() => false);
      },
    };
  }

  /** Waits for another bridge's lease on a job to expire, then takes the job over; ends once the job is done. */
  async function takeOver(held: BridgeJob): Promise<void> {
    let job: BridgeJob | null = held;
    while (job && job.state !== 'done' && !closing.signal.aborted) {
      // At least a short pause: a lease that looks expired here but was not claimable is being renewed.
      await sleep(Math.max((job.lease_expires_at ?? 0) - now(), MIN_TAKEOVER_WAIT_MS), closing.signal);
      if (closing.signal.aborted) return;
      const claimed = await ledger.claimJob(job.session_id, job.tool_use_id, bridgeId, now(), now() + jobLeaseMs, tenantId);
      if (claimed) return drive(claimed, recoverJob);
      job = await ledger.job(job.session_id, job.tool_use_id, tenantId);
    }
  }

  async function start(job: BridgeJob): Promise<AipActionResult> {
    return connector.invoke(
      { id: job.action_id, capability_id: cap('run_start'), input: { body: runBodyOf(job.tool_input) }, idempotency_key: job.idempotency_key },
      context(),
    );
  }

  function kickoff(job: BridgeJob): Promise<void> {
    return traced('kickoff', job, () => postKickoff(job));
  }

  async function postKickoff(job: BridgeJob): Promise<void> {
    const text = `Started Hermes run ${job.run_id}. I will report its result when it finishes.`;
    const outcome = await postWithRetry(job, { status: 'running', text }, false);
    if (outcome.kind === 'accepted') await update(job, { kickoff: 'accepted', kickoff_event_id: eventIdOf(outcome) });
    else if (outcome.kind === 'expired') await update(job, { kickoff: 'expired' });
    else if (outcome.kind === 'rejected') await update(job, { kickoff: 'rejected' });
    else await update(job, { kickoff: 'unknown' });
    const httpStatus = outcome.kind === 'rejected' ? { http_status: outcome.status } : {};
    logger.info({ session_id: job.session_id, tool_use_id: job.tool_use_id, run_id: job.run_id, kickoff: job.kickoff, ...httpStatus }, 'herm kickoff');
  }

  function finish(job: BridgeJob, finale: Finale): Promise<void> {
    return traced('final_result', job, () => postFinal(job, finale));
  }

  async function postFinal(job: BridgeJob, finale: Finale): Promise<void> {
    const outcome = await postWithRetry(job, finale, true);
    if (outcome.kind === 'rejected' && refusedForGood(outcome.status)) {
      // The same result would be refused again (a gone session, a body Herm will not take): done,
      // with no final result held, rather than posted again by every recover().
      logger.error({ session_id: job.session_id, tool_use_id: job.tool_use_id, http_status: outcome.status }, 'herm refused the final result');
      await update(job, { state: 'done', final_status: null, final_event_id: null });
      return;
    }
    if (outcome.kind !== 'accepted') {
      // Left unfinished on purpose: recover() posts it again, and Herm keeps final results idempotent.
      const httpStatus = outcome.kind === 'rejected' ? { http_status: outcome.status } : {};
      logger.error({ session_id: job.session_id, tool_use_id: job.tool_use_id, outcome: outcome.kind, ...httpStatus }, 'herm final result not accepted');
      return;
    }
    // Herm keeps the first final result it accepted; record what it holds, not what this call sent.
    const held = outcome.event.status === 'completed' || outcome.event.status === 'failed' ? outcome.event.status : finale.status;
    await update(job, { state: 'done', final_status: held, final_event_id: eventIdOf(outcome) });
  }

  /**
   * Posts one tool result. A final result is idempotent by (session, tool_use_id), so it is
   * retried on 5xx, 429 and transport errors with bounded backoff; a kickoff only when Herm
   * certainly did not take it (429, nothing sent). 410 response_expired is never retried.
   */
  async function postWithRetry(job: BridgeJob, result: Finale | { status: 'running'; text: string }, final: boolean): Promise<PostOutcome> {
    const event: ToolResultEvent = {
      type: 'user.custom_tool_result',
      tool_use_id: job.tool_use_id,
      content: [{ type: 'text', text: result.text }],
      status: result.status,
      is_error: result.status === 'failed',
    };
    const { attempts, baseDelayMs, maxDelayMs } = settings.finalRetry;
    let outcome: PostOutcome = { kind: 'unknown', reason: 'not sent' };
    for (let attempt = 0; attempt < attempts && !closing.signal.aborted; attempt++) {
      outcome = await herm.postResult(job.session_id, event, closing.signal);
      const again = outcome.kind === 'retryable' || (final && outcome.kind === 'unknown');
      if (!again) return outcome;
      await sleep(Math.min(maxDelayMs, baseDelayMs * 2 ** attempt), closing.signal);
    }
    return outcome;
  }

  /**
   * Follows the run to its end. An approval onApproval left unanswered makes the job fail, whatever
   * the run did without it: the application's approver did not do its part.
   */
  function follow(job: BridgeJob): Promise<Finale | undefined> {
    return traced('follow', job, () => followWithApprovals(job));
  }

  async function followWithApprovals(job: BridgeJob): Promise<Finale | undefined> {
    let unanswered: string | undefined;
    const finale = await followRun(job, async (chunk) => {
      unanswered ??= await answerApproval(job, chunk);
    });
    if (!finale || unanswered === undefined) return finale;
    return { status: 'failed', text: `${unanswered} The run then ${finale.status === 'completed' ? 'completed' : 'failed'}: ${finale.text}` };
  }

  /** Follows the run to its end: the event stream first, then status polling with backoff. */
  async function followRun(job: BridgeJob, onChunk: (chunk: AipStreamChunk) => Promise<void>): Promise<Finale | undefined> {
    const runId = job.run_id as string;
    const deadline = jobDeadline(job);
    const events = await connector.invoke(
      { id: typedId('act_'), capability_id: cap('run_events'), input: { run_id: runId, max_events: 100_000 } },
      context({ deadline, onChunk }),
    );
    if (closing.signal.aborted) return undefined;
    const fromStream = finaleOfEvents(runId, events);
    if (fromStream) return fromStream;
    for (let attempt = 0; !closing.signal.aborted; attempt++) {
      const status = await connector.invoke({ id: typedId('act_'), capability_id: cap('run_status'), input: { run_id: runId } }, context());
      const finale = finaleOfStatus(runId, status);
      if (finale) return finale;
      if (now() >= deadline)
        return { status: 'failed', text: `Hermes run ${runId} did not finish within the time the bridge follows a run; it may still be running.` };
      await sleep(Math.min(settings.statusPoll.maxDelayMs, settings.statusPoll.baseDelayMs * 2 ** attempt), closing.signal);
    }
    return undefined;
  }

  /**
   * Asks onApproval and sends its answer. onApproval gets the approval's window: Hermes denies on
   * its own timeout, and the job must end by its deadline. An answer after the window is dropped,
   * since Hermes resolves the run's oldest pending approval and that may be another command by
   * then. Returns why the job fails when the window passed without an answer.
   */
  async function answerApproval(job: BridgeJob, chunk: AipStreamChunk): Promise<string | undefined> {
    if (chunk.kind !== 'pending_approval' || !options.onApproval) return undefined;
    const event = ((chunk.data as { hermes_sse?: HermesSseEvent }).hermes_sse?.data ?? {}) as Record<string, unknown>;
    const runId = job.run_id as string;
    const windowMs = Math.max(0, Math.min(settings.approvalTimeoutMs, jobDeadline(job) - now()));
    let decision: HermApprovalDecision | null | undefined;
    try {
      const asked = Promise.resolve(options.onApproval({ sessionId: job.session_id, toolUseId: job.tool_use_id, runId, event }));
      const answer = await within(asked, windowMs, closing.signal);
      if (closing.signal.aborted) return undefined;
      if (!answer) {
        logger.error({ run_id: runId, window_ms: windowMs }, 'onApproval did not answer within the approval window; nothing was approved');
        return `The approval request of Hermes run ${runId} was not answered within ${windowMs / 1000} s, so nothing was approved.`;
      }
      decision = answer.value;
    } catch (error) {
      logger.error({ run_id: runId, err: errorName(error) }, 'onApproval failed; nothing was approved');
      return undefined;
    }
    if (!decision) return undefined;
    const input = { run_id: runId, choice: decision.choice };
    // Answered without blocking the event reader: the run only moves on once Hermes has the answer.
    const answer = connector
      .invoke(
        { id: typedId('act_'), capability_id: cap('run_approval'), input, idempotency_key: `herm-approval-${chunk.sequence}-${job.idempotency_key}` },
        context({ approval: decision.grant }),
      )
      .then((result) => logger.info({ run_id: runId, status: result.status, code: result.error?.code }, 'hermes approval answered'));
    approvals.add(answer);
    const settled = () => void approvals.delete(answer);
    answer.then(settled, settled);
    return undefined;
  }

  /** Past it, the bridge stops following the run and reports it as not finished. */
  function jobDeadline(job: BridgeJob): number {
    return job.created_at + settings.maxRunMs;
  }

  /** From a recorded start to an accepted final result. */
  async function runToEnd(job: BridgeJob): Promise<void> {
    if (job.kickoff === 'pending') await kickoff(job);
    const finale = await follow(job);
    if (finale) await finish(job, finale);
  }

  async function handleToolUse(sessionId: string, event: HermToolUseEvent): Promise<BridgeJob | null> {
    const key = idempotencyKeyOf(sessionId, event.tool_use_id);
    const created = now();
    const job: BridgeJob = {
      tenant_id: tenantId,
      session_id: sessionId,
      tool_use_id: event.tool_use_id,
      tool_name: event.name,
      tool_input: event.input,
      action_id: `herm_${key.slice('herm-'.length, 'herm-'.length + 32)}`,
      idempotency_key: key,
      run_id: null,
      state: 'starting',
      kickoff: 'pending',
      kickoff_event_id: null,
      final_status: null,
      final_event_id: null,
      created_at: created,
      updated_at: created,
      lease_owner: bridgeId,
      lease_expires_at: created + jobLeaseMs,
    };
    if (!(await ledger.createJob(job))) return ledger.job(sessionId, event.tool_use_id, tenantId); // a redelivery: never a second run
    // The whole job runs under drive() from here, so recover() can never pick it up half-started.
    let answered!: () => void;
    const kickoffSettled = new Promise<void>((resolve) => (answered = resolve));
    void drive(job, async (current) => {
      let started = false;
      try {
        started = await startAndAnswer(current);
      } finally {
        answered();
      }
      if (started) await runToEnd(current);
    });
    await kickoffSettled;
    return job;
  }

  /** Starts the run and answers the pending call: `running`, or the final `failed` when the start failed. */
  async function startAndAnswer(job: BridgeJob): Promise<boolean> {
    const started = await start(job);
    if (started.status === 'completed') {
      await update(job, { run_id: (started.output as { run_id: string }).run_id, state: 'running' });
      await kickoff(job);
      return true;
    }
    const uncertain = started.error?.details?.uncertain_outcome === true;
    await update(job, { kickoff: 'skipped', state: 'running' });
    await finish(job, {
      status: 'failed',
      text: uncertain
        ? `Starting the Hermes run failed and whether it started is unknown (${started.error?.code}); it was not retried. Ask again to try once more.`
        : `The Hermes run could not be started: ${started.error?.message ?? started.status} (${started.error?.code ?? started.status}).`,
    });
    return false;
  }

  function recoverJob(job: BridgeJob): Promise<void> {
    return traced('recover', job, () => resumeJob(job));
  }

  async function resumeJob(job: BridgeJob): Promise<void> {
    if (job.run_id === null) {
      // The process stopped during the start. Only the connector's own evidence can say whether a run exists.
      const evidence = await connector.evidence(job.action_id, { tenantId });
      if (!evidence) {
        await update(job, { state: 'running', kickoff: job.kickoff === 'pending' ? 'skipped' : job.kickoff });
        return finish(job, {
          status: 'failed',
          text: 'The bridge stopped while starting the Hermes run; whether it started is unknown, and it was not started again. Ask again to retry.',
        });
      }
      await update(job, { run_id: evidence.run_id, state: 'running' });
    }
    const status = await connector.invoke({ id: typedId('act_'), capability_id: cap('run_status'), input: { run_id: job.run_id as string } }, context());
    const known = finaleOfStatus(job.run_id as string, status);
    if (known) return finish(job, known);
    return runToEnd(job);
  }

  function reportStreamError(sessionId: string, error: HermStreamError, onError: ((error: Error) => void) | undefined): void {
    if (!onError) {
      logger.error({ session_id: sessionId, err: error.message }, 'herm session stream failed');
      return;
    }
    try {
      onError(error);
    } catch (thrown) {
      logger.error({ session_id: sessionId, err: error.message, on_error: errorName(thrown) }, 'herm session stream onError failed');
    }
  }

  return {
    async handleEvent(sessionId, event) {
      if (closing.signal.aborted) throw new Error('the Herm bridge is closed');
      const toolUse = asToolUse(event);
      if (typeof sessionId !== 'string' || sessionId === '' || !isStorableId(sessionId) || !toolUse) return null;
      const running = active.get(`${sessionId}\n${toolUse.tool_use_id}`);
      if (running) return ledger.job(sessionId, toolUse.tool_use_id, tenantId);
      return handleToolUse(sessionId, toolUse);
    },
    subscribe(sessionId, subscribeOptions = {}) {
      const signal = AbortSignal.any([closing.signal, ...(subscribeOptions.signal ? [subscribeOptions.signal] : [])]);
      return subscribeToSession({
        client: herm,
        path: settings.streamRoute.replace('{session_id}', encodeURIComponent(sessionId)),
        signal,
        onEvent: async (event) => {
          await this.handleEvent(sessionId, event);
        },
      }).catch((error: HermStreamError) => reportStreamError(sessionId, error, subscribeOptions.onError));
    },
    async idle() {
      while (active.size > 0 || approvals.size > 0 || takeovers.size > 0) await Promise.allSettled([...active.values(), ...approvals, ...takeovers]);
    },
    async recover() {
      for (const job of await ledger.unfinishedJobs(tenantId)) {
        const claimed = await ledger.claimJob(job.session_id, job.tool_use_id, bridgeId, now(), now() + jobLeaseMs, tenantId);
        if (claimed) void drive(claimed, recoverJob);
        else {
          // Held by another live bridge (or finished since it was listed: takeOver sees that).
          const waiting = takeOver(job)
            .catch((error: unknown) =>
              logger.error({ session_id: job.session_id, tool_use_id: job.tool_use_id, err: errorName(error) }, 'herm job takeover stopped'),
            )
            .finally(() => takeovers.delete(waiting));
          takeovers.add(waiting);
        }
      }
    },
    close() {
      closed ??= (async () => {
        closing.abort();
        await Promise.allSettled([...active.values(), ...approvals, ...takeovers]);
        await herm.close();
        if (!options.ledger) await ledger.close();
      })();
      return closed;
    },
  };
}

/** What the run's event stream says, when it reached a terminal event. */
function finaleOfEvents(runId: string, result: AipActionResult): Finale | undefined {
  const output = result.output as RunEventsOutput | undefined;
  const last = output?.terminal ? output.events[output.events.length - 1] : undefined;
  if (!last) return undefined;
  if (last.event === 'run.completed') return { status: 'completed', text: textOf(last.data.output) || output?.text || '(no output)' };
  if (last.event === 'run.cancelled') return { status: 'failed', text: `Hermes run ${runId} was cancelled (run.cancelled) before it finished.` };
  return { status: 'failed', text: `Hermes run ${runId} failed (run.failed): ${textOf(last.data.error) || 'no error text'}` };
}

/** What a status read says: a terminal status, or Hermes no longer knowing the run. */
function finaleOfStatus(runId: string, result: AipActionResult): Finale | undefined {
  if (result.error?.code === errorCode('not_found')) {
    return {
      status: 'failed',
      text: `Evidence lost: Hermes no longer knows run ${runId} (restart or retention expiry). Whether it finished, and what it did, is unknown; this is not a success.`,
    };
  }
  const status = result.status === 'completed' ? (result.output as { status?: string; output?: unknown; error?: unknown }) : undefined;
  if (!status?.status || !TERMINAL_STATUSES.has(status.status)) return undefined;
  if (status.status === 'completed') return { status: 'completed', text: textOf(status.output) || '(no output)' };
  return { status: 'failed', text: `Hermes run ${runId} ended ${status.status}${textOf(status.error) ? `: ${textOf(status.error)}` : ''}` };
}

/** The tool input as a Hermes run body: `prompt` or `input`, `instructions`, `session_id`. */
function runBodyOf(input: Record<string, unknown>): Record<string, unknown> {
  const body: Record<string, unknown> = { input: input.prompt ?? input.input };
  for (const field of ['instructions', 'session_id'] as const) if (input[field] !== undefined) body[field] = input[field];
  // Scripted runs for the simulator travel along; a real Hermes ignores the field.
  if (input.sim_script !== undefined) body.sim_script = input.sim_script;
  return body;
}

/** The same (session, tool_use_id) always maps to the same key, so a redelivery or a restart replays instead of starting again. */
export function idempotencyKeyOf(sessionId: string, toolUseId: string): string {
  return `herm-${createHash('sha256').update(`${sessionId}\n${toolUseId}`).digest('hex').slice(0, 48)}`;
}

function asToolUse(event: unknown): HermToolUseEvent | undefined {
  const candidate = event as Partial<HermToolUseEvent> | null;
  if (candidate?.type !== 'agent.custom_tool_use') return undefined;
  if (typeof candidate.tool_use_id !== 'string' || candidate.tool_use_id === '' || typeof candidate.name !== 'string') return undefined;
  // Stored in the job record as given: ids a ledger cannot hold exactly are not tool calls the bridge can track.
  if (!isStorableId(candidate.tool_use_id)) return undefined;
  const input = candidate.input;
  if (input === null || typeof input !== 'object' || Array.isArray(input)) return undefined;
  return candidate as HermToolUseEvent;
}

function resolveBridgeOptions(options: HermBridgeOptions) {
  const invalid = (why: string) => new ConnectorConfigError('invalid_options', `createHermBridge: ${why}`);
  if (!options?.connector || typeof options.connector.invoke !== 'function') throw invalid('`connector` must be a Hermes connector');
  if (!options.connector.capability(capabilityId(options.endpointId, 'run_start'))) throw invalid('`endpointId` is not an endpoint of the connector');
  let url: URL;
  try {
    url = new URL(options.herm?.baseUrl);
  } catch {
    throw invalid('`herm.baseUrl` is not a valid URL');
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username || url.password || url.pathname !== '/' || url.search || url.hash) {
    throw invalid('`herm.baseUrl` must be an http(s) origin');
  }
  if (typeof options.herm.apiKey !== 'string' || !/^[\x21-\x7e]{1,16384}$/.test(options.herm.apiKey)) throw invalid('`herm.apiKey` must be visible ASCII');
  const route = options.streamRoute ?? DEFAULT_STREAM_ROUTE;
  if (options.ledger !== undefined && !isRunLedger(options.ledger))
    throw invalid('`ledger` must be a RunLedger (createMemoryLedger, createSqliteLedger, createPostgresLedger)');
  const tenantId = options.context?.tenantId;
  if (tenantId !== undefined && (typeof tenantId !== 'string' || tenantId === '' || !isStorableId(tenantId)))
    throw invalid('`context.tenantId` must be a non-empty string of well-formed Unicode without NUL characters');
  const bridgeId = options.bridgeId ?? `bridge_${randomBytes(12).toString('hex')}`;
  if (typeof bridgeId !== 'string' || !/^[\x21-\x7e]{1,128}$/.test(bridgeId)) throw invalid('`bridgeId` must be 1-128 visible ASCII characters');
  const jobLeaseMs = options.jobLeaseMs ?? DEFAULT_JOB_LEASE_MS;
  if (!Number.isInteger(jobLeaseMs) || jobLeaseMs < 100 || jobLeaseMs > 86_400_000) throw invalid('`jobLeaseMs` must be an integer from 100 to 86400000');
  if (!route.startsWith('/') || !route.includes('{session_id}')) throw invalid('`streamRoute` must be a path containing {session_id}');
  const approvalTimeoutMs = options.approvalTimeoutMs ?? DEFAULT_APPROVAL_TIMEOUT_MS;
  if (!Number.isInteger(approvalTimeoutMs) || approvalTimeoutMs < 1 || approvalTimeoutMs > 86_400_000)
    throw invalid('`approvalTimeoutMs` must be an integer from 1 to 86400000');
  return {
    connector: options.connector,
    endpointId: options.endpointId,
    origin: url.origin,
    apiKey: new Secret(options.herm.apiKey),
    streamRoute: route,
    finalRetry: { attempts: 8, baseDelayMs: 250, maxDelayMs: 10_000, ...options.finalRetry },
    statusPoll: { baseDelayMs: 500, maxDelayMs: 15_000, ...options.statusPoll },
    maxRunMs: options.maxRunMs ?? 6 * 60 * 60 * 1000,
    approvalTimeoutMs,
    bridgeId,
    jobLeaseMs,
    telemetry: resolveTelemetry(options),
  };
}

function jobKeyOf(job: Pick<BridgeJob, 'session_id' | 'tool_use_id'>): string {
  return `${job.session_id}\n${job.tool_use_id}`;
}

/**
 * A final result Herm refused with this status would be refused again: any 4xx but 401/403 (a
 * credential an operator can fix, so recover() tries again) and 408/429 (try later).
 */
function refusedForGood(status: number): boolean {
  return status >= 400 && status < 500 && ![401, 403, 408, 429].includes(status);
}

function eventIdOf(outcome: PostOutcome): string | null {
  return outcome.kind === 'accepted' && typeof outcome.event.id === 'string' ? outcome.event.id : null;
}

function textOf(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/** The promise's value if it settles within `ms` and before the signal aborts, else undefined; its rejection is passed on. */
function within<T>(promise: Promise<T>, ms: number, signal: AbortSignal): Promise<{ value: T } | undefined> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return resolve(undefined);
    const timer = setTimeout(expire, ms);
    signal.addEventListener('abort', expire, { once: true });
    function stop() {
      clearTimeout(timer);
      signal.removeEventListener('abort', expire);
    }
    function expire() {
      stop();
      resolve(undefined);
    }
    promise.then(
      (value) => {
        stop();
        resolve({ value });
      },
      (error: unknown) => {
        stop();
        reject(error);
      },
    );
  });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
