/** An HTTP server that reads every request completely and never answers: a provider call whose outcome never arrives. */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface BlackHole {
  url: string;
  /** Every request whose body was fully received, in order. */
  received: Array<{ method: string | undefined; url: string | undefined; headers: IncomingHttpHeaders; body: string }>;
  close(): Promise<void>;
}

export async function startBlackHole(): Promise<BlackHole> {
  const received: BlackHole['received'] = [];
  const sockets = new Set<Socket>();
  const server = createServer((req) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => received.push({ method: req.method, url: req.url, headers: req.headers, body }));
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
