/**
 * The host's HTTP surface on node:http, answering as the reference host's axum router does:
 * `POST /aip/v1/messages` (body limit counted before buffering: Content-Length first, then the
 * streamed bytes), `GET /aip/v1/manifest`, `GET /health`, `GET /ready`, `GET /metrics`; 404 for
 * any other path, 405 with `allow` for another method. A peer's fault (garbage, a slow or aborted
 * body, a reset socket) ends that request only. Ours, not the reference's: a cap on connections,
 * and a byte budget that large bodies are read within (a body waits, unread, for its share).
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Logger } from 'pino';
import { ByteBudget } from './byte-budget.js';
import { METRICS_CONTENT_TYPE, type HostStatus, metricsText } from './metrics.js';

/** One POST to /aip/v1/messages, its body complete and within the limit. */
export interface HostRequest {
  readonly body: Buffer;
  readonly headers: IncomingHttpHeaders;
  /** For a large body: aborted when the client goes away before the answer is sent. */
  readonly signal?: AbortSignal;
}

export interface HostResponse {
  readonly status: number;
  /** Default `application/json`. */
  readonly contentType?: string;
  readonly body: string;
}

/** What answers `POST /aip/v1/messages` (host-exec's `src/host/messages.ts` implements it). It never rejects for a peer's fault. */
export interface MessageHandler {
  handle(request: HostRequest): Promise<HostResponse>;
}

export interface ReadyReport {
  readonly ready: boolean;
  /** The `/ready` body (status, lease_valid, draining, runtime, connector). */
  readonly body: object;
}

export interface HostServerOptions {
  readonly status: HostStatus;
  readonly messages: MessageHandler;
  /** The bound manifest as the JSON text served on GET /aip/v1/manifest. */
  readonly manifestText: string;
  readonly ready: () => Promise<ReadyReport>;
  /** Served on GET /metrics after the reference's eight series (build info, process, latencies). */
  readonly platformMetrics?: { text(): Promise<string> };
  readonly maxRequestBytes: number;
  readonly logger: Logger;
  /** How long a client may take to send its headers (default 10 s). */
  readonly headersTimeoutMs?: number;
  /** How long a client may take to send a message body once its headers arrived (default 30 s); a wait for the body budget counts. */
  readonly bodyTimeoutMs?: number;
  /** Connections held at once; beyond, a new connection is closed as soon as it is accepted (default: no cap). */
  readonly maxConnections?: number;
  /** Bodies up to this size are read at once; a larger one first waits for its share of `bodyBudgetBytes` (default: every body is read at once). */
  readonly largeBodyBytes?: number;
  /** Bytes of large bodies held at once, from their reading to their answer (default 32 MiB). */
  readonly bodyBudgetBytes?: number;
}

export interface HostServer {
  readonly server: Server;
  /** Listens on host:port; rejects with the listen error (EADDRINUSE, EACCES...). */
  listen(host: string, port: number): Promise<AddressInfo>;
  /** Stops accepting connections, lets requests in progress finish for up to `graceMs`, then closes every connection. */
  close(graceMs: number): Promise<void>;
}

const HEALTH_BODY = JSON.stringify({ status: 'ok', protocol: 'AIP', version: '1.0', service: 'aip-connector-host' });
const JSON_TYPE = 'application/json';
const TEXT_TYPE = 'text/plain; charset=utf-8';
/** The text axum's body-limit rejection carries. */
const TOO_LARGE_TEXT = 'Failed to buffer the request body: length limit exceeded';

type Route = { method: 'GET' | 'POST'; answer: (req: IncomingMessage, res: ServerResponse) => Promise<void> };

const DEFAULT_BODY_BUDGET_BYTES = 32 * 1024 * 1024;

export function createHostServer(options: HostServerOptions): HostServer {
  const large: LargeBodies | undefined =
    options.largeBodyBytes === undefined
      ? undefined
      : { threshold: options.largeBodyBytes, budget: new ByteBudget(Math.max(options.bodyBudgetBytes ?? DEFAULT_BODY_BUDGET_BYTES, options.maxRequestBytes)) };
  const routes = routeTable(options, large);
  const active = new Set<ServerResponse>();
  const server = createServer({
    headersTimeout: options.headersTimeoutMs ?? 10_000,
    // A backstop for bodies sent to routes that ignore them; message bodies have their own, shorter bound.
    requestTimeout: 60_000,
    connectionsCheckingInterval: 1_000,
  });
  if (options.maxConnections !== undefined) server.maxConnections = options.maxConnections;
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    active.add(res);
    res.on('close', () => active.delete(res));
    dispatch(routes, req, res).catch((error: unknown) => {
      options.logger.error({ err: error instanceof Error ? error.message : String(error), path: pathOf(req) }, 'host request failed');
      sendOnce(res, 500, TEXT_TYPE, 'internal error');
    });
  });
  server.on('clientError', (_error: Error, socket: Socket) => {
    if (socket.writable && !socket.writableEnded) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    socket.destroy();
  });
  return {
    server,
    listen: (host, port) => listen(server, host, port, options.logger),
    close: (graceMs) => close(server, active, graceMs),
  };
}

function routeTable(options: HostServerOptions, large: LargeBodies | undefined): Map<string, Route> {
  return new Map<string, Route>([
    ['/aip/v1/messages', { method: 'POST', answer: (req, res) => answerMessage(options, large, req, res) }],
    ['/aip/v1/manifest', { method: 'GET', answer: async (_req, res) => sendOnce(res, 200, JSON_TYPE, options.manifestText) }],
    ['/health', { method: 'GET', answer: async (_req, res) => sendOnce(res, 200, JSON_TYPE, HEALTH_BODY) }],
    ['/ready', { method: 'GET', answer: (_req, res) => answerReady(options, res) }],
    ['/metrics', { method: 'GET', answer: async (_req, res) => sendOnce(res, 200, METRICS_CONTENT_TYPE, await metricsBody(options)) }],
  ]);
}

/** axum's routing: unknown path 404 (empty), known path with another method 405 with `allow`; GET routes also answer HEAD. */
async function dispatch(routes: Map<string, Route>, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const route = routes.get(pathOf(req));
  if (route === undefined) return sendOnce(res, 404, undefined, '');
  const method = req.method === 'HEAD' && route.method === 'GET' ? 'GET' : req.method;
  if (method !== route.method) {
    res.setHeader('allow', route.method === 'GET' ? 'GET,HEAD' : 'POST');
    return sendOnce(res, 405, undefined, '');
  }
  await route.answer(req, res);
}

/** The reference's eight series first, unchanged, then the platform's. */
async function metricsBody(options: HostServerOptions): Promise<string> {
  const reference = metricsText(options.status);
  return reference + ((await options.platformMetrics?.text()) ?? '');
}

function pathOf(req: IncomingMessage): string {
  const url = req.url ?? '';
  const end = url.search(/[?#]/);
  return end === -1 ? url : url.slice(0, end);
}

async function answerReady(options: HostServerOptions, res: ServerResponse): Promise<void> {
  const report = await options.ready();
  sendOnce(res, report.ready ? 200 : 503, JSON_TYPE, JSON.stringify(report.body));
}

async function answerMessage(options: HostServerOptions, large: LargeBodies | undefined, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = await readBody(req, options.maxRequestBytes, options.bodyTimeoutMs ?? 30_000, large);
  if (body === 'too_large') return refuseBody(res, 413, TOO_LARGE_TEXT);
  if (body === 'timeout') return refuseBody(res, 408, 'request body timed out');
  if (body === 'aborted') return;
  // Only a large body may wait (for the authentication lane), so only it is told when its client leaves: an
  // abort costs ~15 µs on Node 20 (a DOMException with its stack), too much to spend on every action.
  const signal = large !== undefined && body.bytes.length > large.threshold ? clientGone(res) : undefined;
  try {
    const answer = await options.messages.handle({ body: body.bytes, headers: req.headers, ...(signal === undefined ? {} : { signal }) });
    sendOnce(res, answer.status, answer.contentType ?? JSON_TYPE, answer.body);
  } finally {
    body.release();
  }
}

/** Aborted when the response closes before it was sent whole: the client went away. */
function clientGone(res: ServerResponse): AbortSignal {
  const gone = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) gone.abort();
  });
  return gone.signal;
}

/** Answers without reading the rest of the body, and closes the connection so it is not read either. */
function refuseBody(res: ServerResponse, status: number, text: string): void {
  res.setHeader('connection', 'close');
  sendOnce(res, status, TEXT_TYPE, text);
}

/** Large bodies: over `threshold` bytes, a body is read only within its share of `budget`. */
export interface LargeBodies {
  readonly threshold: number;
  readonly budget: ByteBudget;
}

/** A body read whole; `release` gives its share of the budget back (call it once it has been answered). */
export interface ReadBody {
  readonly bytes: Buffer;
  readonly release: () => void;
}

/**
 * The body, or why there is none: `too_large` as soon as Content-Length or the bytes received pass
 * `limit` (nothing past the limit is kept), `timeout` when it has not arrived within `timeoutMs`,
 * `aborted` when the client went away. With `large`, a body declared over its threshold is not read
 * before its declared size is reserved, and one without a declared size pauses at the threshold until
 * `limit` bytes are; the wait counts in `timeoutMs`.
 */
export function readBody(req: IncomingMessage, limit: number, timeoutMs: number, large?: LargeBodies): Promise<ReadBody | 'too_large' | 'timeout' | 'aborted'> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return Promise.resolve('too_large');
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let received = 0;
    let reserved = false;
    let release = (): void => {};
    let finished = false;
    /** Set while a reservation waits: ending the body another way ends the wait. */
    let waiting: AbortController | undefined;
    const finish = (outcome: Buffer | 'too_large' | 'timeout' | 'aborted'): void => {
      finished = true;
      clearTimeout(timer);
      waiting?.abort();
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onAbort);
      req.off('close', onClose);
      if (typeof outcome !== 'string') {
        resolve({ bytes: outcome, release });
        return;
      }
      release();
      if (outcome !== 'aborted') req.pause();
      resolve(outcome);
    };
    /** Reads on (`then`) once `bytes` are reserved; nothing when the body ended another way first. */
    const whenReserved = (bytes: number, then: () => void): void => {
      reserved = true;
      const wait = new AbortController();
      waiting = wait;
      void large?.budget.reserve(bytes, wait.signal).then((granted) => {
        if (waiting === wait) waiting = undefined;
        if (granted === undefined) return;
        if (finished) {
          granted();
          return;
        }
        release = granted;
        then();
      });
    };
    const onData = (chunk: Buffer): void => {
      received += chunk.length;
      if (received > limit) {
        finish('too_large');
        return;
      }
      chunks.push(chunk);
      if (large !== undefined && !reserved && received > large.threshold) {
        req.pause();
        whenReserved(limit, () => req.resume());
      }
    };
    const onEnd = (): void => finish(Buffer.concat(chunks, received));
    const onAbort = (): void => finish('aborted');
    const onClose = (): void => {
      if (!req.complete) finish('aborted');
    };
    const timer = setTimeout(() => finish('timeout'), timeoutMs);
    req.on('end', onEnd);
    req.on('error', onAbort);
    req.on('close', onClose);
    const size = declared === undefined ? undefined : Number(declared);
    if (large !== undefined && size !== undefined && size > large.threshold) whenReserved(size, () => req.on('data', onData));
    else req.on('data', onData);
  });
}

function sendOnce(res: ServerResponse, status: number, contentType: string | undefined, body: string): void {
  if (res.headersSent || res.destroyed) return;
  res.statusCode = status;
  if (contentType !== undefined) res.setHeader('content-type', contentType);
  res.setHeader('content-length', Buffer.byteLength(body));
  res.end(res.req.method === 'HEAD' ? undefined : body);
}

function listen(server: Server, host: string, port: number, logger: Logger): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error): void => reject(error);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      // An accept failure (EMFILE...) must not end the process: the server keeps listening.
      server.on('error', (error: NodeJS.ErrnoException) => logger.error({ err: error.code ?? error.message }, 'host server error'));
      resolve(server.address() as AddressInfo);
    });
  });
}

async function close(server: Server, active: Set<ServerResponse>, graceMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const deadline = Date.now() + graceMs;
  while (active.size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  server.closeAllConnections();
  await closed;
}
