import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Logger } from 'pino';
import { errorName } from '../internal/logger.js';
import type { BearerToken } from './settings.js';

export interface McpHttpOptions {
  port: number;
  tokens: readonly BearerToken[];
  /** A new MCP server for a new session, acting for the principal its bearer token maps to. */
  serverFor: (principalId: string) => Server;
  logger: Logger;
}

export interface McpHttpServer {
  /** `http://127.0.0.1:<port>/mcp` */
  readonly url: string;
  close(): Promise<void>;
}

interface Session {
  transport: StreamableHTTPServerTransport;
  server: Server;
  principalId: string;
}

const MCP_PATH = '/mcp';
const BEARER = /^Bearer ([\x21-\x7e]+)$/i;

/**
 * Streamable HTTP on 127.0.0.1 only. Every request passes, in order: the path, the Host and
 * Origin checks (DNS rebinding: a browser page on another origin must not reach this server),
 * the bearer token, then its MCP session, which stays bound to the principal that opened it.
 */
export async function serveStreamableHttp(options: McpHttpOptions): Promise<McpHttpServer> {
  const sessions = new Map<string, Session>();
  let allowed = { hosts: new Set<string>(), origins: new Set<string>() };
  const http = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      options.logger.error({ err: errorName(error) }, 'MCP HTTP request failed');
      if (!res.headersSent) refuse(res, 500, 'Internal error');
      else res.end();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if ((req.url ?? '').split('?')[0] !== MCP_PATH) return refuse(res, 404, 'Not found');
    if (!allowed.hosts.has(req.headers.host ?? '')) return refuse(res, 403, 'Forbidden: Host header not allowed');
    const origin = req.headers.origin;
    if (origin !== undefined && !allowed.origins.has(origin)) return refuse(res, 403, 'Forbidden: Origin not allowed');
    const principalId = principalFor(options.tokens, req.headers.authorization);
    if (principalId === undefined) {
      res.setHeader('WWW-Authenticate', 'Bearer realm="hermes-aip-mcp"');
      return refuse(res, 401, 'Unauthorized: a valid bearer token is required');
    }
    const sessionId = req.headers['mcp-session-id'];
    if (sessionId !== undefined) {
      const session = typeof sessionId === 'string' ? sessions.get(sessionId) : undefined;
      // Another principal's session answers as unknown: its existence is not theirs to learn.
      if (!session || session.principalId !== principalId) return refuse(res, 404, 'Session not found');
      return session.transport.handleRequest(req, res);
    }
    await openSession(req, res, principalId);
  }

  async function openSession(req: IncomingMessage, res: ServerResponse, principalId: string): Promise<void> {
    const server = options.serverFor(principalId);
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void sessions.set(id, { transport, server, principalId }),
    });
    await server.connect(transport);
    server.onclose = () => {
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
    };
    await transport.handleRequest(req, res);
    // Anything but an initialize request (which the transport refused) leaves no session behind.
    if (transport.sessionId === undefined) await server.close();
  }

  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(options.port, '127.0.0.1', () => resolve());
  });
  const { port } = http.address() as AddressInfo;
  allowed = {
    hosts: new Set([`127.0.0.1:${port}`, `localhost:${port}`]),
    origins: new Set([`http://127.0.0.1:${port}`, `http://localhost:${port}`]),
  };
  return {
    url: `http://127.0.0.1:${port}${MCP_PATH}`,
    async close() {
      await Promise.allSettled([...sessions.values()].map((session) => session.server.close()));
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/** The principal of the presented bearer token; every configured token is compared in constant time. */
function principalFor(tokens: readonly BearerToken[], authorization: string | undefined): string | undefined {
  const match = BEARER.exec(authorization ?? '');
  if (!match) return undefined;
  const presented = createHash('sha256')
    .update(match[1] as string)
    .digest();
  let principalId: string | undefined;
  for (const token of tokens) if (timingSafeEqual(presented, token.digest)) principalId = token.principalId;
  return principalId;
}

function refuse(res: ServerResponse, status: number, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
}
