/**
 * The runtime double's loopback HTTP servers: node:http on 127.0.0.1:0, bodies read with a
 * limit that Content-Length is checked against before a byte is buffered (as axum's
 * `DefaultBodyLimit` does), and switchable to "down" (every connection destroyed on arrival).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type BodyRead = { ok: true; text: string } | { ok: false; tooLarge: true };

/** The body as UTF-8, or `tooLarge` as soon as the declared or received length passes `limit`. */
export function readLimitedBody(request: IncomingMessage, limit: number): Promise<BodyRead> {
  const declared = Number(request.headers['content-length'] ?? Number.NaN);
  if (declared > limit) return Promise.resolve({ ok: false, tooLarge: true });
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    request.on('data', (part: Buffer) => {
      size += part.length;
      if (size > limit) {
        request.removeAllListeners('data');
        request.resume();
        resolve({ ok: false, tooLarge: true });
      } else parts.push(part);
    });
    request.on('end', () => resolve({ ok: true, text: Buffer.concat(parts).toString('utf8') }));
    request.on('error', reject);
  });
}

export function sendText(response: ServerResponse, status: number, text: string, contentType = 'text/plain; charset=utf-8'): void {
  response.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(text) });
  response.end(text);
}

export function sendJson(response: ServerResponse, status: number, text: string): void {
  sendText(response, status, text, 'application/json');
}

/** axum's `Json` extractor accepts `application/json` and `application/*+json` (with parameters). */
export function isJsonContentType(value: string | undefined): boolean {
  const mime = value?.split(';')[0]?.trim().toLowerCase() ?? '';
  return mime === 'application/json' || (mime.startsWith('application/') && mime.endsWith('+json'));
}

export interface LoopbackServer {
  readonly url: string;
  readonly port: number;
  /** While true, every new request's socket is destroyed before any answer (a peer that is down). */
  down: boolean;
  close(): Promise<void>;
}

export type Handler = (request: IncomingMessage, response: ServerResponse) => Promise<void>;

/** A server on 127.0.0.1:0 that answers 500 (never crashes) when a handler throws; `dropped` hears of each request refused while down. */
export async function startLoopbackServer(handler: Handler, dropped: (request: IncomingMessage) => void = () => {}): Promise<LoopbackServer> {
  const sockets = new Set<Socket>();
  const state = { down: false };
  const server: Server = createServer((request, response) => {
    if (state.down) {
      dropped(request);
      request.socket.destroy();
      return;
    }
    handler(request, response).catch((error: unknown) => {
      if (!response.headersSent) sendText(response, 500, `runtime double fault: ${String(error)}`);
      else response.destroy();
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    get down() {
      return state.down;
    },
    set down(value: boolean) {
      state.down = value;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Resolves once `found()` returns a value, re-checked whenever `changed` fires; rejects after `timeoutMs` (a hung test, never a timing assertion). */
export function waitUntil<T>(found: () => T | undefined, subscribe: (listener: () => void) => () => void, timeoutMs: number, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const now = found();
    if (now !== undefined) {
      resolve(now);
      return;
    }
    const timer = setTimeout(() => {
      unsubscribe();
      reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
    }, timeoutMs);
    const unsubscribe = subscribe(() => {
      const value = found();
      if (value === undefined) return;
      clearTimeout(timer);
      unsubscribe();
      resolve(value);
    });
  });
}
