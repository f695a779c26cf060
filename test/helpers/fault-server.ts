/**
 * A misbehaving HTTP/1.1 peer on 127.0.0.1:0, written on raw `node:net` sockets so that a
 * test controls every byte and every way a connection can end: a TCP reset before, after or
 * in the middle of a response, headers sent slowly or never, bodies that never end, invalid
 * bytes, redirects, wrong content types, keepalive comments forever.
 *
 * Every request is parsed (head and Content-Length body) and recorded before its handler
 * runs, so tests can count requests and read their headers. Connections are counted, and
 * the server remembers which ones the client closed, so a test can prove that the connector
 * let go of a socket. `close()` destroys every socket, which also ends every handler loop.
 */
import { createServer, type Server, type Socket } from 'node:net';

export interface FaultRequest {
  method: string;
  /** The request target exactly as received. */
  target: string;
  /** Lower-cased header names; repeated headers joined with ', '. */
  headers: Record<string, string>;
  body: Buffer;
  /** Which accepted connection (0-based) carried it. */
  connection: number;
}

export interface FaultExchange {
  readonly request: FaultRequest;
  readonly socket: Socket;
  /** Writes raw bytes; resolves true once handed to the kernel, false when the socket is gone. */
  write(data: string | Uint8Array): Promise<boolean>;
  /** Writes a status line and headers (`Connection: close` is added unless given). */
  head(status: number, headers?: Record<string, string | number>): Promise<boolean>;
  /** One HTTP/1.1 chunk of a `Transfer-Encoding: chunked` body (empty data is skipped). */
  chunk(data: string | Uint8Array): Promise<boolean>;
  /** The last chunk, then FIN. */
  endChunked(): Promise<void>;
  /** A complete response with Content-Length, then FIN. */
  respond(status: number, body: string | Uint8Array, headers?: Record<string, string | number>): Promise<void>;
  /** FIN after what was written. */
  end(): void;
  /** TCP RST: the connection is reset, nothing written later arrives. */
  reset(): void;
  /** Waits; resolves false early (and at once) when the socket closed. */
  sleep(ms: number): Promise<boolean>;
  /** Whether the socket has closed (either side). */
  closed(): boolean;
}

export type FaultHandler = (exchange: FaultExchange) => void | Promise<void>;

export interface FaultServer {
  /** 'http://127.0.0.1:<port>' */
  readonly url: string;
  readonly origin: string;
  readonly port: number;
  /** Every request received, in order. */
  readonly requests: FaultRequest[];
  /** Replaces the handler for requests parsed from now on. */
  handle(handler: FaultHandler): void;
  /** Connections accepted so far. */
  connectionCount(): number;
  /** Connections still open now. */
  openConnections(): number;
  /** Connections the client closed (FIN or RST) before the server ended them. */
  closedByClient(): number;
  /** Resolves once no connection is open (polls; rejects after `attempts` × 10 ms, to fail a hung test). */
  drained(attempts?: number): Promise<void>;
  /**
   * Resolves once the connection that carried request `index` (default: the last one) has
   * closed, and says whether the client closed it (rather than the server). Polls; rejects
   * after `attempts` × 10 ms. (undici may open a spare idle connection after a body is
   * destroyed; that one is not the request's and is closed with the pool.)
   */
  requestConnectionClosed(index?: number, attempts?: number): Promise<{ byClient: boolean }>;
  close(): Promise<void>;
}

interface ConnectionState {
  socket: Socket;
  index: number;
  serverEnded: boolean;
  clientClosed: boolean;
  open: boolean;
}

const HEAD_END = Buffer.from('\r\n\r\n');
const MAX_HEAD_BYTES = 64 * 1024;

export async function startFaultServer(initial: FaultHandler = respondNotFound): Promise<FaultServer> {
  let handler = initial;
  const requests: FaultRequest[] = [];
  const connections = new Set<ConnectionState>();
  const states: ConnectionState[] = [];
  let accepted = 0;
  let clientClosed = 0;

  const server: Server = createServer((socket) => {
    const state: ConnectionState = { socket, index: accepted++, serverEnded: false, clientClosed: false, open: true };
    connections.add(state);
    states.push(state);
    socket.setNoDelay(true);
    socket.on('error', () => {
      // Resets from the client are expected; 'close' follows.
    });
    socket.on('end', () => {
      // The client half-closed: answer nothing more on this connection.
      if (!state.serverEnded) {
        state.clientClosed = true;
        socket.destroy();
      }
    });
    socket.on('close', () => {
      if (!state.serverEnded && !state.clientClosed) state.clientClosed = true;
      if (state.clientClosed && !state.serverEnded) clientClosed++;
      state.open = false;
      connections.delete(state);
    });
    void serve(state, () => handler, requests).catch(() => socket.destroy());
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as { port: number };
  const origin = `http://127.0.0.1:${port}`;
  let closing: Promise<void> | undefined;

  return {
    url: origin,
    origin,
    port,
    requests,
    handle(next) {
      handler = next;
    },
    connectionCount: () => accepted,
    openConnections: () => connections.size,
    closedByClient: () => clientClosed,
    async drained(attempts = 500) {
      for (let attempt = 0; attempt < attempts; attempt++) {
        if (connections.size === 0) return;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      throw new Error(`fault server: ${connections.size} connection(s) still open`);
    },
    async requestConnectionClosed(index = requests.length - 1, attempts = 500) {
      const request = requests[index];
      if (!request) throw new Error(`fault server: no request ${index}`);
      const state = states[request.connection] as ConnectionState;
      for (let attempt = 0; attempt < attempts; attempt++) {
        if (!state.open) return { byClient: state.clientClosed && !state.serverEnded };
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      throw new Error(`fault server: the connection of request ${index} is still open`);
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        for (const state of connections) {
          state.serverEnded = true;
          state.socket.destroy();
        }
        server.close(() => resolve());
      });
      return closing;
    },
  };
}

/** Reads requests off one connection, one after another, and runs the handler for each. */
async function serve(state: ConnectionState, currentHandler: () => FaultHandler, requests: FaultRequest[]): Promise<void> {
  const { socket } = state;
  let buffered = Buffer.alloc(0);
  let wake: (() => void) | undefined;
  socket.on('data', (data: Buffer) => {
    buffered = Buffer.concat([buffered, data]);
    wake?.();
  });
  socket.on('close', () => wake?.());
  const more = () =>
    new Promise<void>((resolve) => {
      wake = () => {
        wake = undefined;
        resolve();
      };
    });

  while (state.open && !socket.destroyed) {
    let headEnd = buffered.indexOf(HEAD_END);
    while (headEnd === -1) {
      if (buffered.length > MAX_HEAD_BYTES || !state.open || socket.destroyed) return;
      await more();
      headEnd = buffered.indexOf(HEAD_END);
    }
    const [requestLine = '', ...headerLines] = buffered.subarray(0, headEnd).toString('latin1').split('\r\n');
    const [method = '', target = ''] = requestLine.split(' ');
    const headers: Record<string, string> = {};
    for (const line of headerLines) {
      const colon = line.indexOf(':');
      if (colon <= 0) continue;
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    }
    const length = Number(headers['content-length'] ?? 0);
    const bodyStart = headEnd + HEAD_END.length;
    while (buffered.length < bodyStart + length) {
      if (!state.open || socket.destroyed) return;
      await more();
    }
    const request: FaultRequest = { method, target, headers, body: Buffer.from(buffered.subarray(bodyStart, bodyStart + length)), connection: state.index };
    buffered = buffered.subarray(bodyStart + length);
    requests.push(request);
    await currentHandler()(exchangeFor(state, request));
    if (state.serverEnded) return;
  }
}

function exchangeFor(state: ConnectionState, request: FaultRequest): FaultExchange {
  const { socket } = state;
  const write = (data: string | Uint8Array): Promise<boolean> => {
    if (socket.destroyed || !socket.writable) return Promise.resolve(false);
    return new Promise((resolve) => socket.write(data, (error) => resolve(!error)));
  };
  const exchange: FaultExchange = {
    request,
    socket,
    write,
    head(status, headers = {}) {
      const lines = [`HTTP/1.1 ${status} ${REASONS[status] ?? 'Status'}`];
      const names = new Set(Object.keys(headers).map((name) => name.toLowerCase()));
      for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
      if (!names.has('connection')) lines.push('Connection: close');
      return write(`${lines.join('\r\n')}\r\n\r\n`);
    },
    async chunk(data) {
      const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data);
      if (bytes.length === 0) return !socket.destroyed;
      return write(Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, Buffer.from('\r\n')]));
    },
    async endChunked() {
      await write('0\r\n\r\n');
      exchange.end();
    },
    async respond(status, body, headers = {}) {
      const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body);
      await exchange.head(status, { 'Content-Length': bytes.length, ...headers });
      if (bytes.length > 0) await write(bytes);
      exchange.end();
    },
    end() {
      state.serverEnded = true;
      socket.end();
    },
    reset() {
      state.serverEnded = true;
      if (!socket.destroyed) socket.resetAndDestroy();
    },
    sleep(ms) {
      if (socket.destroyed) return Promise.resolve(false);
      return new Promise((resolve) => {
        const onClose = () => {
          clearTimeout(timer);
          resolve(false);
        };
        const timer = setTimeout(() => {
          socket.off('close', onClose);
          resolve(!socket.destroyed);
        }, ms);
        socket.once('close', onClose);
      });
    },
    closed: () => socket.destroyed,
  };
  return exchange;
}

const REASONS: Record<number, string> = {
  200: 'OK',
  202: 'Accepted',
  301: 'Moved Permanently',
  302: 'Found',
  303: 'See Other',
  307: 'Temporary Redirect',
  308: 'Permanent Redirect',
  401: 'Unauthorized',
  404: 'Not Found',
  409: 'Conflict',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

// ---- canned behaviours -------------------------------------------------------------------

export const JSON_TYPE = 'application/json; charset=utf-8';
export const SSE_TYPE = 'text/event-stream';

/** Hermes' 404 for an unknown run, for every request. */
export function respondNotFound(exchange: FaultExchange): Promise<void> {
  return exchange.respond(404, JSON.stringify({ error: { message: 'Run not found', type: 'invalid_request_error', param: null, code: 'run_not_found' } }), {
    'Content-Type': JSON_TYPE,
  });
}

/** A JSON answer. */
export function respondJson(status: number, body: unknown, headers: Record<string, string | number> = {}): FaultHandler {
  return (exchange) => exchange.respond(status, JSON.stringify(body), { 'Content-Type': JSON_TYPE, ...headers });
}

/** Picks a handler by the request target: `/events` paths, other run paths, and POST /v1/runs. */
export function byRoute(routes: { events?: FaultHandler; status?: FaultHandler; other?: FaultHandler }): FaultHandler {
  return (exchange) => {
    const path = exchange.request.target.split('?')[0] ?? '';
    if (path.endsWith('/events')) return (routes.events ?? respondNotFound)(exchange);
    if (exchange.request.method === 'GET') return (routes.status ?? respondNotFound)(exchange);
    return (routes.other ?? respondNotFound)(exchange);
  };
}

/** A status object for whatever run the request names (the reconciliation read). */
export function respondStatus(status = 'running'): FaultHandler {
  return (exchange) => {
    const runId = decodeURIComponent(exchange.request.target.split('/')[3] ?? '');
    return respondJson(200, { object: 'hermes.run', run_id: runId, status })(exchange);
  };
}

/** The connection is reset as soon as the request has been read: no status line at all. */
export const resetBeforeHeaders: FaultHandler = (exchange) => exchange.reset();

/** A complete status line and headers, then a reset before any body byte. */
export function resetAfterHeaders(status: number, headers: Record<string, string | number>): FaultHandler {
  return async (exchange) => {
    await exchange.head(status, headers);
    await exchange.sleep(20);
    exchange.reset();
  };
}

/** Headers and part of the body, then a reset. */
export function resetMidBody(status: number, headers: Record<string, string | number>, partial: string | Uint8Array, chunked = false): FaultHandler {
  return async (exchange) => {
    await exchange.head(status, headers);
    if (chunked) await exchange.chunk(partial);
    else await exchange.write(partial);
    await exchange.sleep(20);
    exchange.reset();
  };
}

/** The status line and headers one byte every `msPerByte`, then the body (if the client is still there). */
export function slowHeaders(
  msPerByte: number,
  status: number,
  body: string,
  headers: Record<string, string | number> = { 'Content-Type': JSON_TYPE },
): FaultHandler {
  return async (exchange) => {
    const bytes = Buffer.from(
      `HTTP/1.1 ${status} ${REASONS[status] ?? 'Status'}\r\n${Object.entries({ ...headers, 'Content-Length': Buffer.byteLength(body), Connection: 'close' })
        .map(([name, value]) => `${name}: ${value}`)
        .join('\r\n')}\r\n\r\n`,
    );
    for (const byte of bytes) {
      if (!(await exchange.write(Buffer.of(byte)))) return;
      if (!(await exchange.sleep(msPerByte))) return;
    }
    await exchange.write(body);
    exchange.end();
  };
}

/** Reads the request and never answers; the connection stays open until the client gives up. */
export const neverRespond: FaultHandler = async (exchange) => {
  while (await exchange.sleep(1000));
};

/** An SSE response whose one `data:` line never ends: `bytesPerWrite` more bytes every `intervalMs`, forever. */
export function endlessSseLine(bytesPerWrite: number, intervalMs: number): FaultHandler {
  return async (exchange) => {
    await exchange.head(200, { 'Content-Type': SSE_TYPE, 'Transfer-Encoding': 'chunked' });
    await exchange.chunk('data: {"event": "message.delta", "delta": "');
    const filler = 'z'.repeat(bytesPerWrite);
    while (await exchange.chunk(filler)) {
      if (!(await exchange.sleep(intervalMs))) return;
    }
  };
}

/** `: keepalive` every `intervalMs`; after `count` of them (Infinity: never) the stream ends without a terminal event. */
export function keepalives(intervalMs: number, count = Infinity): FaultHandler {
  return async (exchange) => {
    await exchange.head(200, { 'Content-Type': SSE_TYPE, 'Transfer-Encoding': 'chunked' });
    for (let sent = 0; sent < count; sent++) {
      if (!(await exchange.chunk(': keepalive\n\n'))) return;
      if (!(await exchange.sleep(intervalMs))) return;
    }
    await exchange.endChunked();
  };
}

/** A JSON body of `size` bytes (valid JSON: one long string) with a Content-Length header, sent in one go. */
export function oversizedJsonWithLength(size: number, status = 200): FaultHandler {
  return (exchange) => exchange.respond(status, `{"run_id": "${'x'.repeat(Math.max(0, size - 16))}"}`.padEnd(size, ' '), { 'Content-Type': JSON_TYPE });
}

/** Declares a Content-Length of `declared` bytes and then sends none: only a client that trusts the header ends quickly. */
export function declaredOversizedJson(declared: number, status = 200): FaultHandler {
  return async (exchange) => {
    await exchange.head(status, { 'Content-Type': JSON_TYPE, 'Content-Length': declared });
    while (await exchange.sleep(1000));
  };
}

/** A chunked JSON body that never ends: `bytesPerWrite` bytes every `intervalMs`. */
export function endlessChunkedJson(bytesPerWrite: number, intervalMs: number, status = 200): FaultHandler {
  return async (exchange) => {
    await exchange.head(status, { 'Content-Type': JSON_TYPE, 'Transfer-Encoding': 'chunked' });
    await exchange.chunk('{"run_id": "');
    const filler = 'x'.repeat(bytesPerWrite);
    while (await exchange.chunk(filler)) {
      if (!(await exchange.sleep(intervalMs))) return;
    }
  };
}

/** A redirect to `location`, with an empty body. */
export function redirectTo(status: number, location: string): FaultHandler {
  return (exchange) => exchange.respond(status, '', { Location: location });
}

/**
 * Serves an SSE body as the given HTTP chunks, yielding to the event loop after each, then ends the
 * stream; `holdOpen`: never ends it, only the client closes it.
 */
export function sseChunks(chunks: Uint8Array[], { holdOpen = false } = {}): FaultHandler {
  return async (exchange) => {
    await exchange.head(200, { 'Content-Type': SSE_TYPE, 'Cache-Control': 'no-cache', 'Transfer-Encoding': 'chunked' });
    for (const chunk of chunks) {
      if (!(await exchange.chunk(chunk))) return;
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (holdOpen) while (await exchange.sleep(1000));
    else await exchange.endChunked();
  };
}
