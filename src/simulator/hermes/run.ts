import { randomBytes } from 'node:crypto';
import { pyFloat, pyJson } from './py-json.js';
import type { RunStream } from './run-stream.js';
import { estimateTokens } from './script.js';
import type { TimerRegistry } from '../shared/timers.js';
import type { RunStep, SimulatedRun } from './types.js';

export const TERMINAL_STATUSES: ReadonlySet<string> = new Set(['completed', 'failed', 'cancelled', 'interrupted']);
export const APPROVAL_CHOICES = ['once', 'session', 'always', 'deny'] as const;
export const RESTART_ERROR = 'The gateway restarted before this run settled.';

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
}

/** 0.22's `runtime` on a completed run: what served the turn (the simulator names itself). */
export const SIMULATED_RUNTIME = { provider: 'aip-simulator', model: 'aip-simulator', route_source: 'global' } as const;
/** 0.22's `turn_exit_reason` when a stop ended the agent's turn. */
const STOPPED_TURN = 'interrupted_by_user';

/** Shared simulator state a run needs while it executes. */
export interface RunEnvironment {
  readonly timers: TimerRegistry;
  /** The live streams by run id (what the events route looks up and the 429 gate counts). */
  readonly streams: Map<string, RunStream>;
  readonly stepDelayMs: number;
  readonly approvalTimeoutMs: number;
  /** How long an interrupted tool takes to complete (when a stop only interrupts). */
  readonly toolInterruptLagMs: number;
  /** Misbehaviour: terminal events and the end sentinel never reach the stream. */
  readonly streamsNeverTerminate?: boolean;
  /** `approval.request` carries `allow_session` and a `request_id` (Hermes 0.20.1 on). */
  readonly approvalRequestIds: boolean;
  /** Every event carries `seq`, sent as the SSE `id:` too (the `later` profile). */
  readonly eventReplay: boolean;
  /** Events are numbered from 0 by the run's backlog stream, which keeps them (0.22). */
  readonly eventBacklog: boolean;
  /** 0.22's fuller statuses and events (see `ProfileTraits.richRunRecords`). */
  readonly richRunRecords: boolean;
}

interface PendingApproval {
  /** Process-wide request order (oldest first), for the session-keyed misbehaviour. */
  readonly sequence: number;
  /** What `approval.request` announced as `request_id` (32 hex, like Hermes' uuid4().hex). */
  readonly requestId: string;
  settle(choice: string): void;
}

let approvalSequence = 0;
export const TERMINAL_EVENTS: ReadonlySet<string> = new Set(['run.completed', 'run.failed', 'run.cancelled', 'run.interrupted']);

/**
 * Where an event goes. At the pin, `message.delta`, `approval.request` and `run.*`
 * hold a direct reference to the run's queue; the other events look the stream up
 * by run id, so they are dropped once the stream has been removed (disconnect, sweep).
 */
type Delivery = 'direct' | 'lookup';

/** Epoch seconds with sub-millisecond precision, like Python's `time.time()`. */
export function nowSeconds(): number {
  return (performance.timeOrigin + performance.now()) / 1000;
}

export interface RunInit {
  id: string;
  body: Record<string, unknown>;
  sessionId: unknown;
  model: unknown;
  userMessage: unknown;
  stream: RunStream;
  idempotencyKey?: string;
  /** 0.22: the status has no `last_event` until the run's first event. */
  lastEventOnlyOnceSet?: boolean;
}

/** One run: its status record, its control state (agent/task/approval refs) and its queue. */
export class RunState {
  readonly id: string;
  readonly body: Record<string, unknown>;
  readonly sessionId: unknown;
  readonly model: unknown;
  readonly userMessage: unknown;
  /** The queue events are delivered to; a replaying subscriber (`later`) gives the run a new one. */
  stream: RunStream;
  readonly idempotencyKey: string | undefined;
  /** The `seq` of the last event (the `later` profile numbers them from 1). */
  lastSeq = 0;
  readonly createdAt = nowSeconds();
  updatedAt = this.createdAt;
  status = 'queued';
  lastEvent: string | null = null;
  output: string | undefined;
  usage: Usage | undefined;
  error: string | undefined;
  readonly events: Array<Record<string, unknown>> = [];
  /** The agent/task references: present while the run executes (stop answers 404 without them at the pin). */
  controlActive = true;
  /** The approval session (key = run id); gone once the run ends or is swept. */
  approvalSessionActive = true;
  /** Set by the `later` sweep, which expires the transport but keeps a live run counted by the gate. */
  streamSwept = false;
  readonly pendingApprovals: PendingApproval[] = [];
  /** `agent.interrupt()`. */
  readonly interrupt = new AbortController();
  /** A terminal event has been emitted. */
  finished = false;
  /** The process "died" (restart/close): the run stops silently. */
  killed = false;
  /** The last approval step, whose tool has started; the next tool step completes it. */
  lastApproval: { tool: string; denied: boolean } | undefined;
  /** 0.22: the `approval.request` the status shows while the run waits for an approval. */
  approvalEvent: Record<string, unknown> | undefined;
  /** 0.22: the fields of the terminal event, which the status repeats after `last_event`. */
  terminalFields: Record<string, unknown> | undefined;
  /** 0.22: the status as read back from the store after a restart (keys sorted), served as is. */
  restoredStatus: Record<string, unknown> | undefined;
  /** 0.22: the earlier runs of its session this run waits for before its turn (the session turn lease). */
  sessionTurn: Promise<void> | undefined;
  /** 0.22: the steer texts the run accepted, in order. */
  readonly steers: string[] = [];
  private readonly lastEventOnlyOnceSet: boolean;
  /** Resolves once the run has ended or was killed. */
  readonly settled: Promise<void>;
  private settle: () => void = () => undefined;
  private deltaText = '';
  /** The text of the model turn in progress (the deltas since the last turn ended). */
  private turnText = '';
  /** A tool iteration ended: the next delta with visible text starts a new paragraph. */
  needsBreak = false;

  constructor(init: RunInit) {
    this.id = init.id;
    this.body = init.body;
    this.sessionId = init.sessionId;
    this.model = init.model;
    this.userMessage = init.userMessage;
    this.stream = init.stream;
    this.idempotencyKey = init.idempotencyKey;
    this.lastEventOnlyOnceSet = init.lastEventOnlyOnceSet === true;
    this.settled = new Promise((resolve) => {
      this.settle = resolve;
    });
  }

  /** The run has ended or was killed: the next run of its session may take its turn. */
  markSettled(): void {
    this.settle();
  }

  get isLive(): boolean {
    return !this.finished && !this.killed;
  }

  touch(status?: string, lastEvent?: string): void {
    this.updatedAt = nowSeconds();
    if (status !== undefined) this.status = status;
    if (lastEvent !== undefined) this.lastEvent = lastEvent;
  }

  /** The `GET /v1/runs/{id}` object, fields in Hermes' order. */
  statusObject(): Record<string, unknown> {
    if (this.restoredStatus) return this.restoredStatus;
    const object: Record<string, unknown> = {
      object: 'hermes.run',
      run_id: this.id,
      status: this.status,
      updated_at: pyFloat(this.updatedAt),
      created_at: pyFloat(this.createdAt),
      session_id: this.sessionId,
      model: this.model,
      last_event: this.lastEvent,
    };
    if (this.lastEventOnlyOnceSet && this.lastEvent === null) delete object['last_event'];
    // 0.22: the pending approval while waiting, and the terminal event's fields once ended.
    if (this.status === 'waiting_for_approval' && this.approvalEvent) object['approval'] = this.approvalEvent;
    if (this.terminalFields) return Object.assign(object, this.terminalFields);
    if (this.status === 'completed') {
      object['output'] = this.output ?? '';
      object['usage'] = this.usage ?? { input_tokens: 0, output_tokens: 0, total_tokens: 0 };
    }
    if (this.status === 'failed' || this.status === 'interrupted') object['error'] = this.error ?? '';
    return object;
  }

  snapshot(): SimulatedRun {
    const view: SimulatedRun = {
      run_id: this.id,
      status: this.status,
      session_id: typeof this.sessionId === 'string' ? this.sessionId : pyJson(this.sessionId),
      body: this.body,
      events: this.events.map((event) => ({ ...event })),
      pendingApprovals: this.pendingApprovals.length,
    };
    if (this.idempotencyKey !== undefined) view.idempotencyKey = this.idempotencyKey;
    return view;
  }

  recordDelta(text: string): void {
    this.deltaText += text;
    this.turnText += text;
  }

  /**
   * The delta as Hermes streams it: the first one with visible text after a tool iteration is
   * prefixed with "\n\n", once however many iterations ran (run_agent's `_stream_needs_break`).
   * Only the stream carries it: `output` and the turn's `reasoning.available` do not.
   */
  streamedDelta(text: string): string {
    if (!this.needsBreak || text.trim() === '') return text;
    this.needsBreak = false;
    return `\n\n${text}`;
  }

  /** Ends the model turn in progress; returns its text. */
  takeTurnText(): string {
    const text = this.turnText;
    this.turnText = '';
    return text;
  }

  get streamedText(): string {
    return this.deltaText;
  }
}

/** Records an event, updates `updated_at`/`last_event` (and the status if given) and delivers its frame. */
export function emitEvent(env: RunEnvironment, run: RunState, type: string, fields: Record<string, unknown>, delivery: Delivery, status?: string): void {
  const timestamp = nowSeconds();
  const event: Record<string, unknown> =
    type === 'approval.request'
      ? { ...fields, event: type, run_id: run.id, timestamp, choices: [...APPROVAL_CHOICES] }
      : { event: type, run_id: run.id, timestamp, ...fields };
  if (type === 'approval.request' && env.richRunRecords) run.approvalEvent = { ...event };
  if (env.eventReplay) event['seq'] = ++run.lastSeq;
  const target = delivery === 'direct' || env.eventBacklog ? run.stream : env.streams.get(run.id);
  // 0.22 numbers an event when its stream takes it: an event for a swept or ended stream is dropped unnumbered.
  const seq = env.eventBacklog && env.streams.get(run.id) === run.stream ? run.stream.seqForNextEvent : undefined;
  if (seq !== undefined) event['seq'] = seq;
  run.events.push(event);
  run.touch(status, type);
  if (env.streamsNeverTerminate && TERMINAL_EVENTS.has(type)) return;
  if (target !== run.stream) return;
  if (env.eventBacklog) {
    if (seq !== undefined) target.put({ kind: 'bytes', data: eventFrame(event) }, seq);
    return;
  }
  target.put({ kind: 'bytes', data: eventFrame(event) });
}

/** One SSE frame: `data: <json>`, preceded by `id: <seq>` when the event is numbered. */
export function eventFrame(event: Record<string, unknown>): string {
  const id = typeof event['seq'] === 'number' ? `id: ${event['seq']}\n` : '';
  return `${id}data: ${pyJson(toWireEvent(event))}\n\n`;
}

/** Timestamps and durations are Python floats on the wire. */
function toWireEvent(event: Record<string, unknown>): Record<string, unknown> {
  const wire = { ...event };
  for (const key of ['timestamp', 'duration']) {
    const value = wire[key];
    if (typeof value === 'number') wire[key] = pyFloat(value);
  }
  return wire;
}

type Ending =
  | { status: 'completed'; output: string; usage: Usage }
  | { status: 'failed'; error: string }
  | { status: 'failed'; output: string; usage: Usage }
  /** `turnEnded`: a stop ended the agent's turn (0.22 says so); false for a run stopped before its turn began. */
  | { status: 'cancelled'; turnEnded?: boolean }
  | { status: 'interrupted' };

/** The error of a run a gateway shutdown interrupted (0.22). */
const SHUTDOWN_ERROR = 'Gateway shutdown interrupted the run.';

/**
 * 0.22's terminal event fields, in wire order, which the status repeats (`_finish` in
 * api_server_runs.py): what the run produced, then `completed`, `partial`, `interrupted`.
 */
function richTerminalFields(ending: Ending): Record<string, unknown> {
  const outcome = (completed: boolean, interrupted: boolean) => ({ completed, partial: false, interrupted });
  switch (ending.status) {
    case 'completed':
      return { output: ending.output, usage: richUsage(ending.usage), runtime: { ...SIMULATED_RUNTIME }, ...outcome(true, false) };
    case 'failed':
      return 'error' in ending
        ? { error: ending.error, ...outcome(false, false) }
        : { output: ending.output, usage: richUsage(ending.usage), runtime: { ...SIMULATED_RUNTIME }, ...outcome(false, false) };
    case 'cancelled':
      return { ...outcome(false, true), ...(ending.turnEnded === false ? {} : { turn_exit_reason: STOPPED_TURN }) };
    case 'interrupted':
      return { error: SHUTDOWN_ERROR };
  }
}

/** 0.22's usage adds the cache counts (none here). */
function richUsage(usage: Usage): Record<string, number> {
  return {
    input_tokens: usage.input_tokens,
    output_tokens: usage.output_tokens,
    total_tokens: usage.total_tokens,
    cache_read_tokens: 0,
    cache_write_tokens: 0,
  };
}

/** Ends a run: terminal status and event, pending approvals denied, control refs dropped, sentinel queued. */
export function finishRun(env: RunEnvironment, run: RunState, ending: Ending): void {
  if (!run.isLive) return;
  run.finished = true;
  run.markSettled();
  if (env.richRunRecords) {
    const fields = richTerminalFields(ending);
    if (ending.status === 'completed') {
      run.output = ending.output;
      run.usage = ending.usage;
    }
    if ('error' in ending) run.error = ending.error;
    run.terminalFields = fields;
    emitEvent(env, run, `run.${ending.status}`, fields, 'direct', ending.status);
  } else if (ending.status === 'completed') {
    run.output = ending.output;
    run.usage = ending.usage;
    emitEvent(env, run, 'run.completed', { output: ending.output, usage: ending.usage }, 'direct', 'completed');
  } else if (ending.status === 'failed' && 'error' in ending) {
    run.error = ending.error;
    emitEvent(env, run, 'run.failed', { error: ending.error }, 'direct', 'failed');
  } else if (ending.status === 'failed') {
    emitEvent(env, run, 'run.failed', { output: ending.output, usage: ending.usage, completed: false }, 'direct', 'failed');
  } else if (ending.status === 'interrupted') {
    emitEvent(env, run, 'run.interrupted', {}, 'direct', 'interrupted');
  } else {
    emitEvent(env, run, 'run.cancelled', {}, 'direct', 'cancelled');
  }
  dropControlState(run);
  if (!env.streamsNeverTerminate) run.stream.put({ kind: 'end' });
}

/** What both the end of a run and the pin's sweep do to the agent/task/approval refs. */
export function dropControlState(run: RunState): void {
  run.controlActive = false;
  run.approvalSessionActive = false;
  denyPendingApprovals(run);
}

export function denyPendingApprovals(run: RunState): void {
  for (const pending of [...run.pendingApprovals]) pending.settle('deny');
}

/** Resolves the approval `requestId` names, else the oldest pending one (or all of them); returns how many were resolved. */
export function resolveApprovals(run: RunState, choice: string, all: boolean, requestId?: string): number {
  const targets =
    requestId !== undefined
      ? run.pendingApprovals.filter((pending) => pending.requestId === requestId)
      : all
        ? [...run.pendingApprovals]
        : run.pendingApprovals.slice(0, 1);
  for (const target of targets) target.settle(choice);
  return targets.length;
}

/** Simulates the process dying under the run: no further events, every wait released. */
export function killRun(run: RunState): void {
  run.killed = true;
  run.markSettled();
  run.controlActive = false;
  run.approvalSessionActive = false;
  denyPendingApprovals(run);
}

/** Runs a script to its end: queued → running → steps → terminal status. */
export async function executeRun(env: RunEnvironment, run: RunState, steps: RunStep[]): Promise<void> {
  // Like Hermes' background task: `running` one loop turn after the 202 was written,
  // before the client can read that 202.
  await new Promise((resolve) => setImmediate(resolve));
  if (!mayProceed(env, run)) return;
  run.touch('running');
  if (run.sessionTurn && !(await waitForSessionTurn(env, run, run.sessionTurn))) return;
  for (const [index, step] of steps.entries()) {
    // Not cut short by a stop: a worker busy between steps only notices the interrupt at the
    // next step, which is what keeps the `later` profile's `stopping` status observable.
    if (index > 0 && env.stepDelayMs > 0) await env.timers.delay(env.stepDelayMs);
    if (!mayProceed(env, run)) return;
    await executeStep(env, run, step);
    if (!mayProceed(env, run)) return;
  }
  endTurn(env, run);
  finishRun(env, run, completion(run, {}));
}

/**
 * 0.22: the run waits, `running` and silent, until its session's earlier runs have ended. A stop
 * meanwhile cancels it with no `turn_exit_reason` (its turn never began); false when it must not go on.
 */
async function waitForSessionTurn(env: RunEnvironment, run: RunState, turn: Promise<void>): Promise<boolean> {
  const stopped = new Promise<void>((resolve) => {
    if (run.interrupt.signal.aborted) resolve();
    else run.interrupt.signal.addEventListener('abort', () => resolve(), { once: true });
  });
  await Promise.race([turn, stopped]);
  if (!run.isLive) return false;
  if (!run.interrupt.signal.aborted) return true;
  finishRun(env, run, { status: 'cancelled', turnEnded: false });
  return false;
}

/** Hermes reports every model turn that produced text as `reasoning.available` (stripped, at most 500 characters). */
const REASONING_PREVIEW_CHARS = 500;

function endTurn(env: RunEnvironment, run: RunState): void {
  const text = run.takeTurnText().trim();
  if (text !== '' && run.isLive) emitEvent(env, run, 'reasoning.available', { text: text.slice(0, REASONING_PREVIEW_CHARS) }, 'lookup');
}

/** False when the run must not go on; an interrupted run is cancelled here. */
function mayProceed(env: RunEnvironment, run: RunState): boolean {
  if (!run.isLive) return false;
  if (!run.interrupt.signal.aborted) return true;
  finishRun(env, run, { status: 'cancelled', turnEnded: true });
  return false;
}

async function executeStep(env: RunEnvironment, run: RunState, step: RunStep): Promise<void> {
  switch (step.type) {
    case 'delta':
      run.recordDelta(String(step.text));
      emitEvent(env, run, 'message.delta', { delta: run.streamedDelta(String(step.text)) }, 'direct');
      return;
    case 'reasoning':
      emitEvent(env, run, 'reasoning.available', { text: String(step.text ?? '') }, 'lookup');
      return;
    case 'tool':
      endTurn(env, run);
      await executeTool(env, run, step);
      run.needsBreak = true;
      return;
    case 'approval':
      endTurn(env, run);
      await executeApproval(env, run, step);
      return;
    case 'sleep':
      await env.timers.delay(Number(step.ms) || 0, run.interrupt.signal);
      return;
    case 'fail':
      finishRun(env, run, step.error === undefined ? { ...completion(run, step), status: 'failed' } : { status: 'failed', error: String(step.error) });
      return;
    case 'interrupted':
      finishRun(env, run, { status: 'interrupted' });
      return;
    case 'event':
      emitEvent(env, run, String(step.event), step.fields ?? {}, 'direct');
      return;
    case 'complete':
      endTurn(env, run);
      finishRun(env, run, completion(run, step));
      return;
    case 'cut':
      if (run.stream.hasSubscribers) run.stream.put({ kind: 'cut' });
      return;
    case 'raw':
      run.stream.put({ kind: 'bytes', data: step.data });
      return;
  }
}

function completion(run: RunState, step: { output?: string; usage?: Usage }): Extract<Ending, { status: 'completed' }> {
  const output = step.output ?? run.streamedText;
  const usage = step.usage ?? estimateUsage(run, output);
  return { status: 'completed', output, usage };
}

function estimateUsage(run: RunState, output: string): Usage {
  const input = typeof run.userMessage === 'string' ? run.userMessage : pyJson(run.userMessage);
  const inputTokens = estimateTokens(input);
  const outputTokens = estimateTokens(output);
  return { input_tokens: inputTokens, output_tokens: outputTokens, total_tokens: inputTokens + outputTokens };
}

/**
 * A tool call: `tool.started` (unless an approval step started it), the tool's run time, then
 * `tool.completed`. A stop that cancels at once ends the run with no `tool.completed`; one that
 * only interrupts lets the tool notice it and fail first.
 */
async function executeTool(env: RunEnvironment, run: RunState, step: Extract<RunStep, { type: 'tool' }>): Promise<void> {
  const approval = run.lastApproval;
  run.lastApproval = undefined;
  const startedAt = performance.now();
  if (!approval) emitEvent(env, run, 'tool.started', { tool: step.tool, preview: step.preview ?? null }, 'lookup');
  const tool = approval?.tool ?? step.tool;
  const runMs = Number(step.runMs) || 0;
  const finished = runMs <= 0 || (await env.timers.delay(runMs, run.interrupt.signal));
  if (!finished) return failInterruptedTool(env, run, tool, startedAt);
  completeTool(env, run, tool, step.duration ?? secondsSince(startedAt), step.error ?? approval?.denied ?? false, step.result);
}

async function executeApproval(env: RunEnvironment, run: RunState, step: Extract<RunStep, { type: 'approval' }>): Promise<void> {
  const tool = step.tool ?? 'terminal';
  const startedAt = performance.now();
  // Hermes asks for approval from inside the tool call, so the tool has started by then.
  emitEvent(env, run, 'tool.started', { tool, preview: step.command }, 'lookup');
  const choice = await requestApproval(env, run, step);
  if (run.interrupt.signal.aborted) return failInterruptedTool(env, run, tool, startedAt);
  run.lastApproval = { tool, denied: choice === 'deny' };
}

/**
 * A stop that cancels at once has already ended the run (no `tool.completed`); one that only
 * interrupts lets the tool notice it, after `toolInterruptLagMs`, and fail.
 */
async function failInterruptedTool(env: RunEnvironment, run: RunState, tool: string, startedAt: number): Promise<void> {
  if (!run.isLive) return;
  await env.timers.delay(env.toolInterruptLagMs);
  completeTool(env, run, tool, secondsSince(startedAt), true, INTERRUPTED_TOOL_RESULT);
}

/** What 0.22's `tool.completed` shows of an interrupted `terminal` command. */
const INTERRUPTED_TOOL_RESULT = pyJson({ output: '[Command interrupted]', exit_code: 130, error: null });

/** `tool.completed`; 0.22 adds a `preview` of the result (empty when the script gives none). */
function completeTool(env: RunEnvironment, run: RunState, tool: string, seconds: number, error: boolean, result?: string): void {
  if (!run.isLive) return;
  const fields: Record<string, unknown> = { tool, duration: Math.round(seconds * 1000) / 1000, error };
  if (env.richRunRecords) fields['preview'] = result ?? '';
  emitEvent(env, run, 'tool.completed', fields, 'lookup');
}

function secondsSince(startedAt: number): number {
  return (performance.now() - startedAt) / 1000;
}

/**
 * Emits `approval.request` and waits for an answer. A timeout, a stop, or a missing
 * approval session (after the pin's sweep) all count as a denial; a timeout leaves the
 * status at `waiting_for_approval` (Hermes' quirk).
 */
function requestApproval(env: RunEnvironment, run: RunState, step: Extract<RunStep, { type: 'approval' }>): Promise<string> {
  if (!run.approvalSessionActive) return Promise.resolve('deny');
  return new Promise<string>((resolve) => {
    const answered = new AbortController();
    const pending: PendingApproval = {
      sequence: ++approvalSequence,
      requestId: randomBytes(16).toString('hex'),
      settle(choice) {
        const index = run.pendingApprovals.indexOf(pending);
        if (index < 0) return;
        run.pendingApprovals.splice(index, 1);
        answered.abort();
        resolve(choice);
      },
    };
    run.pendingApprovals.push(pending);
    const patternKey = step.pattern_key ?? 'dangerous command';
    const fields = {
      command: step.command,
      pattern_key: patternKey,
      pattern_keys: [patternKey],
      description: step.description ?? patternKey,
      allow_permanent: true,
      ...(env.approvalRequestIds ? { allow_session: true, request_id: pending.requestId } : {}),
    };
    emitEvent(env, run, 'approval.request', fields, 'direct', 'waiting_for_approval');
    const wait = AbortSignal.any([answered.signal, run.interrupt.signal]);
    void env.timers.delay(env.approvalTimeoutMs, wait).then(() => pending.settle('deny'));
  });
}
