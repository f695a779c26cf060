import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { collectBody, listen, originOf, type CollectedBody } from '../shared/http-common.js';
import { checkIdempotencyKey, checkSessionKey, corsDecision, decodePath, isAuthorized, matchRoute } from './http-routing.js';
import { PROFILE_TRAITS, type ProfileTraits } from './profiles.js';
import { PyFloat, pyFloat, pyJson } from './py-json.js';
import {
  APPROVAL_CHOICES,
  RESTART_ERROR,
  RunState,
  TERMINAL_STATUSES,
  dropControlState,
  emitEvent,
  eventFrame,
  executeRun,
  finishRun,
  killRun,
  nowSeconds,
  resolveApprovals,
  type RunEnvironment,
} from './run.js';
import { checkRunRequest, coerceBool, pyTruthy } from './run-request.js';
import { RunStream } from './run-stream.js';
import { defaultScript } from './script.js';
import { streamRunEvents } from './sse.js';
import { TimerRegistry } from '../shared/timers.js';
import type { HermesSimulator, HermesSimulatorOptions, RecordedRequest, SimulatedRun, SimulatorFault, SimulatorProfile, SimulatorRoute } from './types.js';
import {
  BODY_TOO_LARGE,
  GATEWAY_AUTH_FAILED,
  INVALID_API_KEY,
  MAX_BODY_BYTES,
  applyHeaders,
  applySecurityHeaders,
  headerValue,
  openAiError,
  parseJsonBody,
  runNotFound,
  sendBody,
  sendHttpText,
  sendJson,
  sendUnhandledError,
  type HeaderList,
  type ParsedJson,
} from './wire.js';

const IDEMPOTENCY_RECORD_TTL_MS = 24 * 60 * 60 * 1000;
const STATUSES_ANSWERED_BY_LATER_STOP = new Set(['completed', 'failed', 'cancelled']);
/** Measured on Hermes 0.19.0: a stopped `sleep 30` ends about 1.3 s after the stop. */
const TOOL_INTERRUPT_LAG_MS = 1300;

type ResolvedOptions = Required<Omit<HermesSimulatorOptions, 'script'>> & Pick<HermesSimulatorOptions, 'script'>;

function resolveOptions(options: HermesSimulatorOptions): ResolvedOptions {
  if (typeof options.apiKey !== 'string' || options.apiKey === '') {
    throw new TypeError('startHermesSimulator: apiKey is required (Hermes refuses to start without API_SERVER_KEY)');
  }
  const profile = options.profile ?? 'pin';
  return {
    apiKey: options.apiKey,
    host: options.host ?? '127.0.0.1',
    port: options.port ?? 0,
    profile,
    modelName: options.modelName ?? 'hermes-agent',
    maxConcurrentRuns: Math.max(0, options.maxConcurrentRuns ?? 10),
    keepaliveMs: options.keepaliveMs ?? PROFILE_TRAITS[profile].keepaliveMs,
    // 0.22 keeps a run's last 1000 events (`_RunStream.BACKLOG_LIMIT`, the end of the stream included).
    replayRetainedEvents: options.replayRetainedEvents ?? (PROFILE_TRAITS[profile].eventBacklog ? 1000 : 10_000),
    sweepIntervalMs: options.sweepIntervalMs ?? 60_000,
    streamTtlMs: options.streamTtlMs ?? 300_000,
    retentionMs: options.retentionMs ?? 3_600_000,
    streamLookupMs: options.streamLookupMs ?? 1_000,
    approvalTimeoutMs: options.approvalTimeoutMs ?? PROFILE_TRAITS[profile].approvalTimeoutMs,
    toolInterruptLagMs: options.toolInterruptLagMs ?? TOOL_INTERRUPT_LAG_MS,
    stepDelayMs: options.stepDelayMs ?? 0,
    corsOrigins: [...(options.corsOrigins ?? [])],
    script: options.script,
    misbehaviour: { ...options.misbehaviour },
  };
}

interface IdempotencyRecord {
  fingerprint: string;
  runId: string;
  createdAt: number;
}

interface IdempotencyClaim {
  key: string;
  fingerprint: string;
}

type IdempotencyStep = { kind: 'answered' } | { kind: 'go-on'; parsed?: ParsedJson; idempotency?: IdempotencyClaim };

interface ArmedFault {
  fault: SimulatorFault;
  remaining: number;
}

/** Everything a request handler receives. */
interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  runId: string;
  body: Promise<CollectedBody>;
}

class HermesSimulatorServer implements HermesSimulator {
  readonly requests: RecordedRequest[] = [];
  readonly profile: SimulatorProfile;
  private readonly traits: ProfileTraits;
  private readonly server: Server;
  private readonly timers = new TimerRegistry();
  private readonly streams = new Map<string, RunStream>();
  /** Status records Hermes still holds (what GET /v1/runs/{id} reads). */
  private readonly statuses = new Map<string, RunState>();
  /** Every run ever created, for inspection; survives restarts and sweeps. */
  private readonly history = new Map<string, RunState>();
  private readonly idempotency = new Map<string, IdempotencyRecord>();
  /** 0.22: per session named in a run's body, what its next run waits for (its earlier runs ending). */
  private readonly sessionTurns = new Map<string, Promise<void>>();
  private readonly faults: ArmedFault[] = [];
  private readonly env: RunEnvironment;
  private sweepTimer: NodeJS.Timeout | undefined;
  private closing: Promise<void> | undefined;
  /** drain() was called: new runs are refused with 503 `gateway_draining`. */
  private draining = false;
  private created = 0;
  private boundPort = 0;

  constructor(private readonly options: ResolvedOptions) {
    this.profile = options.profile;
    this.traits = PROFILE_TRAITS[options.profile];
    this.env = {
      timers: this.timers,
      streams: this.streams,
      stepDelayMs: options.stepDelayMs,
      approvalTimeoutMs: options.approvalTimeoutMs,
      toolInterruptLagMs: options.toolInterruptLagMs,
      streamsNeverTerminate: options.misbehaviour.streamsNeverTerminate === true,
      approvalRequestIds: this.traits.approvalRequestIds,
      eventReplay: this.traits.eventReplay,
      eventBacklog: this.traits.eventBacklog,
      richRunRecords: this.traits.richRunRecords,
    };
    this.server = createServer((req, res) => {
      this.handle(req, res).catch(() => this.answerCrash(res));
    });
  }

  get port(): number {
    return this.boundPort;
  }

  get url(): string {
    return originOf(this.options.host, this.boundPort);
  }

  async listen(): Promise<void> {
    this.boundPort = await listen(this.server, this.options.host, this.options.port);
    this.sweepTimer = setInterval(() => this.sweep(), Math.max(1, this.options.sweepIntervalMs));
    this.sweepTimer.unref();
  }

  // ---- public inspection and control -------------------------------------------------

  runs(): SimulatedRun[] {
    return [...this.history.values()].map((run) => run.snapshot());
  }

  run(runId: string): SimulatedRun | undefined {
    return this.history.get(runId)?.snapshot();
  }

  startCount(): number {
    return this.created;
  }

  injectFault(fault: SimulatorFault): void {
    if ((fault.response === undefined) === (fault.destroy !== true)) {
      throw new TypeError('injectFault: give exactly one of `response` or `destroy: true`');
    }
    this.faults.push({ fault, remaining: Math.max(1, Math.floor(fault.times ?? 1)) });
  }

  /**
   * A process restart. Pin to v0.20: everything is forgotten. Later: idempotency records and
   * terminal statuses survive; unsettled runs become `interrupted`. v0.22: the same, but only for
   * runs started with an `Idempotency-Key` (the others are forgotten), read back as stored. Either
   * way, live runs stop silently and every open connection drops.
   */
  restart(): void {
    const unsettled = new Set([...this.statuses.values()].filter((run) => !TERMINAL_STATUSES.has(run.status)));
    for (const run of this.history.values()) if (run.isLive) killRun(run);
    this.streams.clear();
    switch (this.traits.durableStatuses) {
      case 'none':
        this.statuses.clear();
        break;
      case 'all-runs':
        this.interruptUnsettledRuns();
        break;
      case 'keyed-runs':
        this.restoreKeyedRuns(unsettled);
        break;
    }
    this.sessionTurns.clear();
    this.timers.clearAll();
    this.server.closeAllConnections();
  }

  drain(): void {
    if (this.traits.drain === 'none') return;
    this.draining = true;
    if (this.traits.drain !== 'refuse-and-interrupt') return;
    for (const run of this.history.values()) if (run.isLive) finishRun(this.env, run, { status: 'interrupted' });
  }

  sweep(): void {
    this.sweepStreams();
    this.sweepStatuses();
    this.sweepIdempotencyRecords();
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    clearInterval(this.sweepTimer);
    for (const run of this.history.values()) if (run.isLive) killRun(run);
    this.timers.close();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  /**
   * 0.22: only runs started with an `Idempotency-Key` have a stored status; it is read back with its
   * keys sorted (Python's `sort_keys=True`), and one that had not settled becomes `interrupted`
   * with the restart's error, keeping its other fields (a pending `approval` included).
   */
  private restoreKeyedRuns(unsettled: ReadonlySet<RunState>): void {
    for (const [runId, run] of this.statuses) {
      if (run.idempotencyKey === undefined) {
        this.statuses.delete(runId);
        continue;
      }
      const stored = sortedKeys(run.statusObject()) as Record<string, unknown>;
      if (unsettled.has(run)) {
        run.error = RESTART_ERROR;
        run.touch('interrupted', 'run.interrupted');
        Object.assign(stored, { status: 'interrupted', error: RESTART_ERROR, last_event: 'run.interrupted', updated_at: pyFloat(run.updatedAt) });
      }
      run.restoredStatus = stored;
    }
  }

  private interruptUnsettledRuns(): void {
    for (const run of this.statuses.values()) {
      if (TERMINAL_STATUSES.has(run.status)) continue;
      run.error = RESTART_ERROR;
      run.touch('interrupted');
    }
  }

  /** Streams older than the TTL go; at the pin the run's control refs go with them. */
  private sweepStreams(): void {
    const now = Date.now();
    for (const [runId, stream] of this.streams) {
      if (now - stream.createdAt < this.options.streamTtlMs) continue;
      if (this.traits.sweepSparesSubscribedStreams && stream.hasSubscribers) continue;
      this.streams.delete(runId);
      const run = this.history.get(runId);
      if (!run) continue;
      if (!this.traits.sweepKeepsLiveControl) dropControlState(run);
      else if (run.isLive) run.streamSwept = true;
    }
  }

  private sweepStatuses(): void {
    const now = nowSeconds();
    for (const [runId, run] of this.statuses) {
      if (TERMINAL_STATUSES.has(run.status) && (now - run.updatedAt) * 1000 >= this.options.retentionMs) {
        this.statuses.delete(runId);
      }
    }
  }

  private sweepIdempotencyRecords(): void {
    const now = Date.now();
    for (const [key, record] of this.idempotency) {
      if (now - record.createdAt >= IDEMPOTENCY_RECORD_TTL_MS) this.idempotency.delete(key);
    }
  }

  // ---- request pipeline: record → CORS → body limit → route → security headers → auth → fault → handler
  // (Hermes' middlewares run in that order; the innermost one adds the security headers to what a
  // handler returns, so CORS, body-limit and routing answers go without them.)

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = this.record(req);
    const cors = corsDecision(req, this.options.corsOrigins);
    if (cors.kind === 'forbidden') return sendBody(res, 403, '');
    if (cors.kind === 'allowed') {
      applyHeaders(res, cors.headers);
      if (req.method === 'OPTIONS') return sendBody(res, 200, '');
    }
    if (this.declaresOversizedBody(req)) {
      sendJson(res, 413, BODY_TOO_LARGE);
      return;
    }
    const match = matchRoute(req.method ?? 'GET', req.url ?? '/', { capabilities: this.traits.servesCapabilities, steer: this.traits.steer });
    if (match.kind === 'not-found') return sendHttpText(res, 404, '404: Not Found');
    if (match.kind === 'method-not-allowed') {
      return sendHttpText(res, 405, '405: Method Not Allowed', [['Allow', match.allow]]);
    }
    applySecurityHeaders(res);
    // /health needs no key.
    if (match.route !== 'health' && !isAuthorized(req, this.options.apiKey)) {
      sendJson(res, 401, this.traits.authFailure === 'gateway_auth_failed' ? GATEWAY_AUTH_FAILED : INVALID_API_KEY);
      return;
    }
    const exchange: Exchange = { req, res, runId: match.runId, body };
    const fault = this.takeFault(match.route);
    if (fault) return this.answerWithFault(exchange, fault);
    return this.dispatch(match.route, exchange);
  }

  private dispatch(route: SimulatorRoute, exchange: Exchange): Promise<void> | void {
    switch (route) {
      case 'health':
        return this.handleHealth(exchange);
      case 'capabilities':
        return this.handleCapabilities(exchange);
      case 'start':
        return this.handleStart(exchange);
      case 'status':
        return this.handleStatus(exchange);
      case 'events':
        return this.handleEvents(exchange);
      case 'approval':
        return this.handleApproval(exchange);
      case 'stop':
        return this.handleStop(exchange);
      case 'steer':
        return this.handleSteer(exchange);
    }
  }

  private record(req: IncomingMessage): Promise<CollectedBody> {
    const rawPath = req.url ?? '/';
    const recorded: RecordedRequest = {
      method: req.method ?? 'GET',
      rawPath,
      path: decodePath(rawPath),
      headers: { ...req.headers },
      body: '',
      receivedAt: Date.now(),
    };
    this.requests.push(recorded);
    const body = collectBody(req, MAX_BODY_BYTES);
    void body.then((collected) => {
      recorded.body = collected.bytes.toString('utf8');
    });
    return body;
  }

  private declaresOversizedBody(req: IncomingMessage): boolean {
    if (!['POST', 'PUT', 'PATCH'].includes(req.method ?? '')) return false;
    const length = headerValue(req, 'content-length');
    return length !== undefined && Number(length) > MAX_BODY_BYTES;
  }

  private answerCrash(res: ServerResponse): void {
    if (res.headersSent) res.destroy();
    else sendUnhandledError(res);
  }

  private takeFault(route: SimulatorRoute): SimulatorFault | undefined {
    const index = this.faults.findIndex((armed) => armed.fault.route === route);
    const armed = this.faults[index];
    if (!armed) return undefined;
    armed.remaining -= 1;
    if (armed.remaining <= 0) this.faults.splice(index, 1);
    return armed.fault;
  }

  private async answerWithFault({ req, res, body }: Exchange, fault: SimulatorFault): Promise<void> {
    await body;
    if (fault.destroy === true || !fault.response) {
      req.socket.destroy();
      return;
    }
    const { status, headers = {}, body: text = '' } = fault.response;
    const list: HeaderList = Object.entries(headers);
    const hasContentType = list.some(([name]) => name.toLowerCase() === 'content-type');
    if (text !== '' && !hasContentType) list.unshift(['Content-Type', 'application/json; charset=utf-8']);
    sendBody(res, status, text, list);
  }

  // ---- GET /health ---------------------------------------------------------------------

  /** Like Hermes' health check, with a version that names the simulator and the release it models. */
  private handleHealth({ res }: Exchange): void {
    sendJson(res, 200, { status: 'ok', platform: 'hermes-agent', version: this.traits.healthVersion });
  }

  /** Answers a body that is not a JSON object (400, or aiohttp's 500); false when it is one. */
  private answeredUnusableBody(res: ServerResponse, parsed: ParsedJson): parsed is Exclude<ParsedJson, { kind: 'object' }> {
    switch (parsed.kind) {
      case 'object':
        return false;
      case 'invalid':
        sendJson(res, 400, openAiError('Invalid JSON'));
        return true;
      case 'non-object':
        sendUnhandledError(res);
        return true;
    }
  }

  // ---- POST /v1/runs ------------------------------------------------------------------

  private async handleStart(exchange: Exchange): Promise<void> {
    const { req, res } = exchange;
    const session = checkSessionKey(req);
    if (session.kind === 'invalid') {
      return sendJson(res, 400, { error: { message: session.message, type: 'invalid_request_error' } });
    }
    if (this.draining) {
      return sendJson(res, 503, openAiError('Gateway is draining existing work; retry shortly.', 'gateway_draining'), [['Retry-After', '1']]);
    }
    const sessionHeaders: HeaderList = session.key === undefined ? [] : [['X-Hermes-Session-Key', session.key]];
    if (this.traits.idempotentStarts === 'answer-current-status') return this.handleStartInOrderOf022(exchange, session.key, sessionHeaders);
    const early = this.traits.idempotentStarts !== 'none' ? await this.idempotencyStep(exchange, session.key, sessionHeaders) : { kind: 'go-on' as const };
    if (early.kind === 'answered') return;
    if (this.gateIsFull()) {
      const message = `Too many concurrent runs (max ${this.options.maxConcurrentRuns})`;
      return sendJson(res, 429, openAiError(message, 'rate_limit_exceeded', 'rate_limit_error'), [['Retry-After', '1']]);
    }
    const parsed = early.parsed ?? (await this.readJson(exchange));
    if (parsed === undefined || this.answeredUnusableBody(res, parsed)) return;
    const check = checkRunRequest(parsed.value);
    if (check.kind === 'unhandled') return sendUnhandledError(res);
    if (check.kind === 'bad-request') {
      sendJson(res, 400, openAiError(check.message));
      return;
    }
    const run = this.createRun(parsed.value, check.userMessage, early.idempotency);
    const answer: Record<string, unknown> = { run_id: run.id, status: 'started' };
    if (this.traits.idempotentStarts !== 'none') answer['replayed'] = false;
    sendJson(res, 202, answer, sessionHeaders);
  }

  /**
   * 0.22 (`_handle_runs`): the body is parsed first, then `Idempotency-Key` (stripped; empty means
   * none) and `input` are checked, then a key seen before is answered (replay or conflict) before the gate.
   */
  private async handleStartInOrderOf022(exchange: Exchange, sessionKey: string | undefined, sessionHeaders: HeaderList): Promise<void> {
    const { req, res } = exchange;
    const parsed = await this.readJson(exchange);
    if (parsed === undefined || this.answeredUnusableBody(res, parsed)) return;
    const key = (headerValue(req, 'idempotency-key') ?? '').trim();
    if (key.length > 255 || /[^\x21-\x7e]/.test(key)) {
      return sendJson(res, 400, openAiError('Idempotency-Key must be 1-255 visible ASCII characters', 'invalid_idempotency_key'));
    }
    const check = checkRunRequest(parsed.value);
    if (check.kind === 'unhandled') return sendUnhandledError(res);
    if (check.kind === 'bad-request') return sendJson(res, 400, openAiError(check.message));
    let claim: IdempotencyClaim | undefined;
    if (key !== '') {
      const fingerprint = pyJson({ body: parsed.value, session_key: sessionKey ?? null }, { sortKeys: true });
      const record = this.idempotency.get(key);
      if (record) return this.answerIdempotentRepeat(res, record, fingerprint, sessionHeaders);
      claim = { key, fingerprint };
    }
    if (this.gateIsFull()) {
      const message = `Too many concurrent runs (max ${this.options.maxConcurrentRuns})`;
      return sendJson(res, 429, openAiError(message, 'rate_limit_exceeded', 'rate_limit_error'), [['Retry-After', '1']]);
    }
    const run = this.createRun(parsed.value, check.userMessage, claim);
    sendJson(res, 202, { run_id: run.id, status: 'started', replayed: false }, sessionHeaders);
  }

  /** The parsed body, or undefined when the client went away before sending all of it. */
  private async readJson(exchange: Exchange): Promise<ParsedJson | undefined> {
    const collected = await exchange.body;
    return collected.complete ? parseJsonBody(collected) : undefined;
  }

  /**
   * `later` only (idempotent starts): validates `Idempotency-Key` and answers a repeated key (replay or conflict).
   * A replay must work even when the gate is full, so with a key the body is read before the gate.
   */
  private async idempotencyStep(exchange: Exchange, sessionKey: string | undefined, sessionHeaders: HeaderList): Promise<IdempotencyStep> {
    const { req, res } = exchange;
    const keyCheck = checkIdempotencyKey(req);
    if (keyCheck.kind === 'absent') return { kind: 'go-on' };
    if (keyCheck.kind === 'invalid') {
      sendJson(res, 400, openAiError('Idempotency-Key must be 1-255 visible ASCII characters', 'invalid_idempotency_key'));
      return { kind: 'answered' };
    }
    const parsed = await this.readJson(exchange);
    if (parsed === undefined) return { kind: 'answered' };
    if (parsed.kind === 'invalid') return { kind: 'go-on', parsed };
    const fingerprint = pyJson({ body: parsed.value, session_key: sessionKey ?? null }, { sortKeys: true });
    const record = this.idempotency.get(keyCheck.key);
    if (!record) return { kind: 'go-on', parsed, idempotency: { key: keyCheck.key, fingerprint } };
    this.answerIdempotentRepeat(res, record, fingerprint, sessionHeaders);
    return { kind: 'answered' };
  }

  /** `later` answers a replay `started`; 0.22 answers the run's status now and words a conflict differently. */
  private answerIdempotentRepeat(res: ServerResponse, record: IdempotencyRecord, fingerprint: string, sessionHeaders: HeaderList): void {
    const current = this.traits.idempotentStarts === 'answer-current-status';
    if (record.fingerprint !== fingerprint) {
      const message = current
        ? 'Idempotency-Key was already used with a different request payload'
        : 'Idempotency-Key was already used with a different request';
      sendJson(res, 409, openAiError(message, 'idempotency_key_conflict'));
      return;
    }
    if (!current) {
      sendJson(res, 202, { run_id: record.runId, status: 'started', replayed: true }, [...sessionHeaders, ['Idempotency-Replayed', 'true']]);
      return;
    }
    const status = this.history.get(record.runId)?.statusObject()['status'] ?? 'queued';
    sendJson(res, 202, { run_id: record.runId, status, replayed: true }, [['Idempotency-Replayed', 'true'], ...sessionHeaders]);
  }

  /** Full when the profile's count reaches the limit (0 disables the gate). */
  private gateIsFull(): boolean {
    const limit = this.options.maxConcurrentRuns;
    return limit > 0 && this.gateCount() >= limit;
  }

  /**
   * 0.18.2 counts live run streams, so a finished run whose stream nobody read holds its slot;
   * `later` adds live runs whose stream the sweep expired; 0.19.0 counts live runs only.
   */
  private gateCount(): number {
    const liveRuns = [...this.statuses.values()].filter((run) => run.isLive);
    switch (this.traits.gateCounts) {
      case 'streams':
        return this.streams.size;
      case 'streams-and-swept-live-runs':
        return this.streams.size + liveRuns.filter((run) => run.streamSwept).length;
      case 'live-runs':
        return liveRuns.length;
    }
  }

  private createRun(body: Record<string, unknown>, userMessage: unknown, idempotency: IdempotencyClaim | undefined): RunState {
    const steps = this.options.script ? this.options.script(body) : defaultScript(body, userMessage);
    const id = `run_${randomUUID().replaceAll('-', '')}`;
    const stream = new RunStream(this.timers, this.traits.eventBacklog ? this.options.replayRetainedEvents : undefined);
    const sessionId = body['session_id'];
    const run = new RunState({
      id,
      body,
      sessionId: pyTruthy(sessionId) ? sessionId : id,
      model: Object.hasOwn(body, 'model') ? body['model'] : this.options.modelName,
      userMessage,
      stream,
      ...(idempotency ? { idempotencyKey: idempotency.key } : {}),
      lastEventOnlyOnceSet: this.traits.richRunRecords,
    });
    this.streams.set(id, stream);
    this.statuses.set(id, run);
    this.history.set(id, run);
    this.created++;
    if (idempotency) this.idempotency.set(idempotency.key, { fingerprint: idempotency.fingerprint, runId: id, createdAt: Date.now() });
    if (this.traits.sessionTurns && pyTruthy(sessionId)) this.takeSessionTurn(run, pyJson(sessionId));
    void executeRun(this.env, run, steps);
    return run;
  }

  /** 0.22: a run of a session named in the body waits for the session's earlier runs (the session turn lease). */
  private takeSessionTurn(run: RunState, session: string): void {
    const earlier = this.sessionTurns.get(session);
    if (earlier) run.sessionTurn = earlier;
    this.sessionTurns.set(session, earlier ? Promise.all([earlier, run.settled]).then(() => undefined) : run.settled);
  }

  // ---- GET /v1/runs/{id} and /events ---------------------------------------------------

  private handleStatus({ res, runId }: Exchange): void {
    const run = this.statuses.get(runId);
    if (!run) {
      sendJson(res, 404, runNotFound(runId));
      return;
    }
    sendJson(res, 200, run.statusObject());
  }

  private async handleEvents(exchange: Exchange): Promise<void> {
    if (this.traits.eventBacklog) return this.streamFromBacklog(exchange);
    const { req, res, runId } = exchange;
    const lastSeq = this.traits.eventReplay ? lastSeqOf(req.url ?? '') : undefined;
    if (lastSeq !== undefined) return this.replayEvents(res, runId, lastSeq);
    const stream = await this.waitForStream(runId, res);
    if (!stream) {
      sendJson(res, 404, runNotFound(runId));
      return;
    }
    await streamRunEvents(res, stream, { keepaliveMs: this.options.keepaliveMs, timers: this.timers });
    // Whatever ended this subscriber, Hermes' `finally` removes the stream.
    if (this.streams.get(runId) === stream) this.streams.delete(runId);
  }

  /**
   * `?last_seq=N` (`later`): the retained events after N, then the live ones. A replay that would
   * need events no longer retained starts with `replay.truncated`. Unknown runs answer 404.
   */
  private async replayEvents(res: ServerResponse, runId: string, lastSeq: number): Promise<void> {
    const run = this.statuses.get(runId);
    if (!run) return sendJson(res, 404, runNotFound(runId));
    const retained = run.events.slice(-this.options.replayRetainedEvents);
    const stream = new RunStream(this.timers);
    const oldest = retained[0]?.['seq'];
    if (typeof oldest === 'number' && oldest > lastSeq + 1) {
      const truncated = { event: 'replay.truncated', run_id: runId, timestamp: nowSeconds(), last_seq: lastSeq, oldest_seq: oldest };
      stream.put({ kind: 'bytes', data: eventFrame(truncated) });
    }
    for (const event of retained) if ((event['seq'] as number) > lastSeq) stream.put({ kind: 'bytes', data: eventFrame(event) });
    if (run.isLive) {
      run.stream = stream;
      this.streams.set(runId, stream);
    } else stream.put({ kind: 'end' });
    await streamRunEvents(res, stream, { keepaliveMs: this.options.keepaliveMs, timers: this.timers });
    if (this.streams.get(runId) === stream) this.streams.delete(runId);
  }

  /**
   * 0.22: an id this server never issued is 404 at once (run ownership); a known run's stream is
   * looked up as before. The subscriber gets `: open`, then `replay.truncated` when the events after
   * its cursor (`Last-Event-ID`, else `?last_seq`; -1 when absent or not a number) are no longer all
   * retained, then the retained events after the cursor and the live ones.
   */
  private async streamFromBacklog({ req, res, runId }: Exchange): Promise<void> {
    if (!this.statuses.has(runId) && !this.streams.has(runId)) return sendJson(res, 404, runNotFound(runId));
    const stream = await this.waitForStream(runId, res);
    if (!stream) return sendJson(res, 404, runNotFound(runId));
    const header = headerValue(req, 'last-event-id');
    const cursor = header !== undefined && header !== '' ? header : new URL(req.url ?? '/', 'http://simulator').searchParams.get('last_seq');
    const lastSeq = pythonIntOr(cursor, -1);
    const subscription = stream.subscribe(lastSeq);
    const opening = [': open\n\n'];
    if (subscription.truncatedAt !== undefined) {
      const truncated: Record<string, unknown> = {
        event: 'replay.truncated',
        run_id: runId,
        timestamp: pyFloat(nowSeconds()),
        oldest_retained_seq: subscription.truncatedAt,
      };
      if (cursor !== null && cursor !== undefined) truncated['requested_seq'] = lastSeq;
      opening.push(`data: ${pyJson(truncated)}\n\n`);
    }
    await streamRunEvents(res, subscription.queue, { keepaliveMs: this.options.keepaliveMs, timers: this.timers, opening, onDone: () => subscription.close() });
  }

  /** Hermes polls every 50 ms for about a second before answering 404. */
  private async waitForStream(runId: string, res: ServerResponse): Promise<RunStream | undefined> {
    const gone = new AbortController();
    const onClose = (): void => gone.abort();
    res.once('close', onClose);
    try {
      const deadline = Date.now() + this.options.streamLookupMs;
      for (;;) {
        const stream = this.streams.get(runId);
        if (stream) return stream;
        const remaining = deadline - Date.now();
        if (remaining <= 0) return undefined;
        if (!(await this.timers.delay(Math.min(50, remaining), gone.signal))) return undefined;
      }
    } finally {
      res.off('close', onClose);
    }
  }

  // ---- POST /v1/runs/{id}/approval -------------------------------------------------------

  private async handleApproval({ res, runId, body }: Exchange): Promise<void> {
    const run = this.statuses.get(runId);
    if (!run) {
      sendJson(res, 404, runNotFound(runId));
      return;
    }
    const collected = await body;
    if (!collected.complete) return;
    const parsed = parseJsonBody(collected);
    if (this.answeredUnusableBody(res, parsed)) return;
    if (this.traits.richRunRecords) return this.answerApprovalAsOf022(res, run, parsed.value);
    const choice = normalizeChoice(parsed.value['choice']);
    if (choice === undefined) {
      const message = 'Invalid approval choice; expected one of: once, session, always, deny';
      return sendJson(res, 400, openAiError(message, 'invalid_approval_choice'));
    }
    if (!run.approvalSessionActive) {
      return sendJson(res, 409, openAiError(`Run has no active approval session: ${runId}`, 'approval_not_active'));
    }
    const requestId = this.traits.approvalsByRequestId ? parsed.value['request_id'] : undefined;
    if (requestId !== undefined && (typeof requestId !== 'string' || requestId.length > MAX_APPROVAL_REQUEST_ID)) {
      return sendJson(res, 400, openAiError('Invalid approval request_id', 'invalid_approval_request'));
    }
    const all = coerceBool(parsed.value['all']) || coerceBool(parsed.value['resolve_all']);
    const resolved = resolveApprovals(this.approvalTarget(run), choice, all, requestId);
    if (resolved === 0) {
      return sendJson(res, 409, openAiError(`Run has no pending approval: ${runId}`, 'approval_not_pending'));
    }
    emitEvent(this.env, run, 'approval.responded', { choice, resolved }, 'lookup', 'running');
    sendJson(res, 200, { object: 'hermes.run.approval_response', run_id: runId, choice, resolved });
  }

  /**
   * 0.22 (`_handle_run_approval`): `request_id` is checked first (given, it must be 1–256 characters
   * once stripped), then the choice (the allowed ones listed sorted), then the approval session; the
   * answer and `approval.responded` repeat the `request_id` that was named.
   */
  private answerApprovalAsOf022(res: ServerResponse, run: RunState, body: Record<string, unknown>): void {
    const rawRequestId = body['request_id'];
    const requestId = typeof rawRequestId === 'string' ? rawRequestId.trim() : '';
    if (rawRequestId !== undefined && rawRequestId !== null && (requestId === '' || requestId.length > MAX_APPROVAL_REQUEST_ID)) {
      sendJson(res, 400, openAiError('Approval request_id is invalid.', 'invalid_approval_request'));
      return;
    }
    const choice = normalizeChoice(body['choice']);
    if (choice === undefined) {
      const message = `Invalid approval choice; expected one of: ${[...APPROVAL_CHOICES].sort().join(', ')}`;
      sendJson(res, 400, openAiError(message, 'invalid_approval_choice'));
      return;
    }
    if (!run.approvalSessionActive) {
      sendJson(res, 409, openAiError(`Run has no active approval session: ${run.id}`, 'approval_not_active'));
      return;
    }
    const all = coerceBool(body['all']) || coerceBool(body['resolve_all']);
    const resolved = resolveApprovals(this.approvalTarget(run), choice, all, requestId === '' ? undefined : requestId);
    if (resolved === 0) {
      sendJson(res, 409, openAiError(`Run has no pending approval: ${run.id}`, 'approval_not_pending'));
      return;
    }
    const named = requestId === '' ? {} : { request_id: requestId };
    emitEvent(this.env, run, 'approval.responded', { choice, ...named, resolved }, 'lookup', 'running');
    sendJson(res, 200, { object: 'hermes.run.approval_response', run_id: run.id, choice, ...named, resolved });
  }

  /** The run whose queue an answer to `run` resolves: itself, unless approvals leak across a session (misbehaviour). */
  private approvalTarget(run: RunState): RunState {
    if (this.options.misbehaviour.approvalsLeakAcrossSession !== true) return run;
    let target = run;
    for (const other of this.statuses.values()) {
      if (other.sessionId !== run.sessionId || !other.approvalSessionActive) continue;
      const oldest = other.pendingApprovals[0]?.sequence;
      if (oldest !== undefined && oldest < (target.pendingApprovals[0]?.sequence ?? Infinity)) target = other;
    }
    return target;
  }

  // ---- POST /v1/runs/{id}/steer (from 0.20.1) ----------------------------------------------

  /**
   * Only a run whose status is `running` takes steer text (409 `run_not_accepting_steer`, before the
   * body is read); the text is `input`, else `message`, else `text`. An accepted steer adds
   * `run.steered` to the run's events and leaves it `running`; the script goes on unchanged.
   */
  private async handleSteer({ res, runId, body }: Exchange): Promise<void> {
    const run = this.statuses.get(runId);
    if (!run) return sendJson(res, 404, runNotFound(runId));
    if (run.status !== 'running' || !run.isLive) {
      return sendJson(res, 409, openAiError(`Run is not currently accepting steer input: ${runId}`, 'run_not_accepting_steer'));
    }
    const collected = await body;
    if (!collected.complete) return;
    const parsed = parseJsonBody(collected);
    if (parsed.kind === 'invalid') return sendJson(res, 400, openAiError('Invalid JSON in request body'));
    if (parsed.kind === 'non-object') return sendJson(res, 400, openAiError('Request body must be a JSON object'));
    const fields = parsed.value;
    const raw = [fields['input'], fields['message'], fields['text']].find((value) => pyTruthy(value));
    const text = typeof raw === 'string' ? raw.trim() : '';
    if (text === '') {
      return sendJson(res, 400, openAiError("Missing non-empty steer text; expected 'input', 'message', or 'text'.", 'invalid_steer_input'));
    }
    run.steers.push(text);
    emitEvent(this.env, run, 'run.steered', { accepted: true }, 'lookup', 'running');
    sendJson(res, 200, { object: 'hermes.run.steer', run_id: runId, accepted: true });
  }

  // ---- GET /v1/capabilities ---------------------------------------------------------------

  /** Hermes' capability document, trimmed to the runs API (see `capabilitiesOf`). */
  private handleCapabilities({ res }: Exchange): void {
    sendJson(res, 200, capabilitiesOf(this.options.modelName, this.traits));
  }

  // ---- POST /v1/runs/{id}/stop ---------------------------------------------------------

  private handleStop({ res, runId }: Exchange): void {
    const run = this.statuses.get(runId);
    if (this.traits.stopAnswersFinishedRuns) {
      const finished = this.traits.stopAnswersInterruptedRuns ? TERMINAL_STATUSES : STATUSES_ANSWERED_BY_LATER_STOP;
      if (run && finished.has(run.status)) {
        sendJson(res, 200, run.statusObject());
        return;
      }
      if (run && !run.controlActive) {
        sendJson(res, 409, openAiError(`Run is not active: ${runId}`, 'run_not_active'));
        return;
      }
    }
    if (!run?.controlActive) {
      sendJson(res, 404, runNotFound(runId));
      return;
    }
    run.touch('stopping', 'run.stopping');
    run.interrupt.abort();
    // 0.18.2 cancels the wrapper task at once: cancelled before the 200 goes out. Later releases
    // only interrupt: the script ends at its current step (a running tool fails), then the run is cancelled.
    if (this.traits.stopCancelsAtOnce) finishRun(this.env, run, { status: 'cancelled' });
    sendJson(res, 200, { run_id: runId, status: 'stopping' });
  }
}

/** Python's `max(-1, int(str(raw).strip()))`, or `fallback` when there is no cursor or `int()` refuses it. */
function pythonIntOr(raw: string | null | undefined, fallback: number): number {
  if (raw === null || raw === undefined) return fallback;
  const text = raw.trim();
  if (!/^[+-]?\d+(?:_\d+)*$/.test(text)) return fallback;
  return Math.max(-1, Number(text.replaceAll('_', '')));
}

/** A JSON value with every object's keys sorted, as Python's `json.dumps(sort_keys=True)` stores it. */
function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (value === null || typeof value !== 'object' || value instanceof PyFloat) return value;
  const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(entries.map(([key, item]) => [key, sortedKeys(item)]));
}

/** `?last_seq=N` of an events request: N when it is a whole number, else undefined (a plain subscription). */
function lastSeqOf(target: string): number | undefined {
  const value = new URL(target, 'http://simulator').searchParams.get('last_seq');
  return value !== null && /^\d{1,15}$/.test(value) ? Number(value) : undefined;
}

/**
 * `GET /v1/capabilities` as the profile's release answers it, trimmed to what concerns runs: its order,
 * its `features` about runs (nothing there declares event replay, `interrupted` or session turns; 0.22
 * adds `runs_idempotency`, 0.20.1 `run_steer`), and the runs' endpoints.
 */
function capabilitiesOf(modelName: string, traits: ProfileTraits): Record<string, unknown> {
  const endpoint = (method: string, path: string) => ({ method, path });
  const durable = traits.idempotentStarts === 'none' ? {} : { runs_idempotency: { supported: true, durable: true, retention_seconds: 86_400 } };
  const steer = traits.steer ? { run_steer: true } : {};
  return {
    object: 'hermes.api_server.capabilities',
    platform: 'hermes-agent',
    model: modelName,
    auth: { type: 'bearer', required: true },
    features: {
      run_submission: true,
      ...durable,
      run_status: true,
      run_events_sse: true,
      run_stop: true,
      ...steer,
      run_approval_response: true,
      tool_progress_events: true,
      approval_events: true,
    },
    endpoints: {
      health: endpoint('GET', '/health'),
      runs: endpoint('POST', '/v1/runs'),
      run_status: endpoint('GET', '/v1/runs/{run_id}'),
      run_events: endpoint('GET', '/v1/runs/{run_id}/events'),
      run_approval: endpoint('POST', '/v1/runs/{run_id}/approval'),
      ...(traits.steer ? { run_steer: endpoint('POST', '/v1/runs/{run_id}/steer') } : {}),
      run_stop: endpoint('POST', '/v1/runs/{run_id}/stop'),
    },
  };
}

/** The `later` profile's bound on an approval's `request_id` (reference §9). */
const MAX_APPROVAL_REQUEST_ID = 256;

/** `str(body.get("choice", "")).strip().lower()`, with approve/approved/allow meaning once. */
function normalizeChoice(value: unknown): string | undefined {
  if (value !== undefined && typeof value !== 'string') return undefined;
  const choice = (value ?? '').trim().toLowerCase();
  if (choice === 'approve' || choice === 'approved' || choice === 'allow') return 'once';
  return (APPROVAL_CHOICES as readonly string[]).includes(choice) ? choice : undefined;
}

export async function startHermesSimulator(options: HermesSimulatorOptions): Promise<HermesSimulator> {
  const simulator = new HermesSimulatorServer(resolveOptions(options));
  await simulator.listen();
  return simulator;
}
