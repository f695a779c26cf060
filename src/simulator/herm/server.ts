import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { collectBody, listen, originOf, type CollectedBody } from '../shared/http-common.js';
import { TimerRegistry } from '../shared/timers.js';
import { HermSessions } from './sessions.js';
import { SessionStreams } from './stream.js';
import type { HermCustomToolUse, HermFault, HermRecordedRequest, HermSimulator, HermSimulatorOptions, HermToolCallRequest, HermToolCallView } from './types.js';
import { parseEventsRequest } from './validate.js';
import {
  BODY_TOO_LARGE,
  DEFAULT_FAULT_BODY,
  INVALID_API_KEY,
  MAX_BODY_BYTES,
  NOT_FOUND,
  hasApiKey,
  hermError,
  matchHermRoute,
  sendJson,
  sendText,
} from './wire.js';

type ResolvedOptions = Required<HermSimulatorOptions>;

function resolveOptions(options: HermSimulatorOptions): ResolvedOptions {
  if (typeof options.apiKey !== 'string' || options.apiKey === '') {
    throw new TypeError('startHermSimulator: apiKey is required');
  }
  return {
    apiKey: options.apiKey,
    host: options.host ?? '127.0.0.1',
    port: options.port ?? 0,
    pendingTimeoutMs: options.pendingTimeoutMs ?? 300_000,
    keepaliveMs: Math.max(1, options.keepaliveMs ?? 15_000),
  };
}

interface ArmedFault {
  fault: HermFault;
  remaining: number;
}

interface Answer {
  status: number;
  body: unknown;
}

class HermSimulatorServer implements HermSimulator {
  readonly requests: HermRecordedRequest[] = [];
  private readonly server: Server;
  private readonly timers = new TimerRegistry();
  private readonly streams: SessionStreams;
  private readonly sessions: HermSessions;
  private readonly faults: ArmedFault[] = [];
  private closing: Promise<void> | undefined;
  private boundPort = 0;

  constructor(private readonly options: ResolvedOptions) {
    this.streams = new SessionStreams(this.timers, options.keepaliveMs);
    this.sessions = new HermSessions(this.timers, this.streams, options.pendingTimeoutMs);
    this.server = createServer((req, res) => {
      this.handle(req, res).catch(() => {
        if (res.headersSent) res.destroy();
        else sendJson(res, 500, hermError('api_error', 'simulator error'));
      });
    });
  }

  get url(): string {
    return originOf(this.options.host, this.boundPort);
  }

  async listen(): Promise<void> {
    this.boundPort = await listen(this.server, this.options.host, this.options.port);
  }

  // ---- public inspection and control -------------------------------------------------

  emitToolUse(sessionId: string, call: HermToolCallRequest): HermCustomToolUse {
    return this.sessions.emitToolUse(sessionId, call);
  }

  expire(sessionId: string, toolUseId: string): void {
    this.sessions.expire(sessionId, toolUseId);
  }

  history(sessionId: string): Array<Record<string, unknown>> {
    return this.sessions.history(sessionId);
  }

  accepted(sessionId?: string): Array<Record<string, unknown>> {
    return this.sessions.accepted(sessionId);
  }

  toolCall(sessionId: string, toolUseId: string): HermToolCallView | undefined {
    return this.sessions.toolCall(sessionId, toolUseId);
  }

  continuations(sessionId: string, toolUseId: string): number {
    return this.sessions.continuations(sessionId, toolUseId);
  }

  subscribers(sessionId: string): number {
    return this.streams.count(sessionId);
  }

  injectFault(fault: HermFault): void {
    if ((fault.status === undefined) === (fault.drop === undefined)) {
      throw new TypeError('injectFault: give exactly one of `status` or `drop`');
    }
    if (fault.drop !== undefined && fault.body !== undefined) throw new TypeError('injectFault: `body` goes with `status`');
    this.faults.push({ fault: { ...fault }, remaining: Math.max(1, Math.floor(fault.times ?? 1)) });
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.timers.close();
    this.streams.endAll();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  // ---- request pipeline: record → route → auth → fault → handler --------------------------

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = this.record(req);
    const route = matchHermRoute(req.method ?? 'GET', req.url ?? '/');
    if (route.kind === 'not-found') return sendJson(res, 404, NOT_FOUND);
    if (!hasApiKey(req, this.options.apiKey)) return sendJson(res, 401, INVALID_API_KEY);
    if (route.kind === 'stream') return this.streams.open(route.sessionId, res);
    const fault = this.takeFault();
    const collected = await body;
    if (!collected.complete) return;
    if (fault?.status !== undefined) return sendText(res, fault.status, fault.body ?? DEFAULT_FAULT_BODY);
    if (fault?.drop === 'before-processing') return void req.socket.destroy();
    const answer = this.processEvents(route.sessionId, collected);
    if (fault?.drop === 'after-processing') return void req.socket.destroy();
    sendJson(res, answer.status, answer.body);
  }

  private processEvents(sessionId: string, collected: CollectedBody): Answer {
    if (collected.overflow) return { status: 413, body: BODY_TOO_LARGE };
    const parsed = parseEventsRequest(collected.bytes);
    if (parsed.kind === 'invalid') return { status: 400, body: hermError('invalid_request_error', parsed.message) };
    return this.sessions.submit(sessionId, parsed.events);
  }

  private record(req: IncomingMessage): Promise<CollectedBody> {
    const recorded: HermRecordedRequest = { method: req.method ?? 'GET', path: req.url ?? '/', headers: { ...req.headers }, body: '' };
    this.requests.push(recorded);
    const body = collectBody(req, MAX_BODY_BYTES);
    void body.then((collected) => {
      recorded.body = collected.bytes.toString('utf8');
    });
    return body;
  }

  private takeFault(): HermFault | undefined {
    const armed = this.faults[0];
    if (!armed) return undefined;
    armed.remaining -= 1;
    if (armed.remaining <= 0) this.faults.shift();
    return armed.fault;
  }
}

/** Starts a Herm session-events simulator on `host:port` (default 127.0.0.1, an ephemeral port). */
export async function startHermSimulator(options: HermSimulatorOptions): Promise<HermSimulator> {
  const server = new HermSimulatorServer(resolveOptions(options));
  await server.listen();
  return server;
}
