/**
 * The scale bench's server: `ENDPOINTS` node:http servers on 127.0.0.1:0 in one child process
 * (one origin, hence one connector pool, per endpoint). `GET /v1/runs/{id}/events` gets its
 * event-stream headers at once and is then held open, idle, until the parent asks for the
 * release: every held stream then gets the same pre-rendered body (servers.ts `renderStream`:
 * deltas, `run.completed`, `: stream closed`) and ends. It counts the sockets it holds.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { forkServer, type ForkedServer } from './ledger-server.js';
import { BENCH_API_KEY, renderStream } from './servers.js';

export type ScaleRequest = { type: 'held' } | { type: 'release'; deltas: number } | { type: 'sockets' };

export interface ScaleServer {
  /** One origin per endpoint. */
  origins: string[];
  /** Streams open and waiting for the release. */
  held(): Promise<number>;
  /** Sends every held stream its body of `deltas` deltas and ends it. */
  release(deltas: number): Promise<number>;
  /** Sockets the server holds open. */
  sockets(): Promise<number>;
  close(): Promise<void>;
}

export async function startScaleServer(endpoints: number): Promise<ScaleServer> {
  const server: ForkedServer = await forkServer(fileURLToPath(import.meta.url), `--scale-server=${endpoints}`);
  const { origins } = await server.ask<{ origins: string[] }>({ type: 'origins' });
  const count = async (message: ScaleRequest) => (await server.ask<{ count: number }>(message)).count;
  return {
    origins,
    held: () => count({ type: 'held' }),
    release: (deltas) => count({ type: 'release', deltas }),
    sockets: () => count({ type: 'sockets' }),
    close: () => server.close(),
  };
}

async function serve(endpoints: number): Promise<void> {
  const authorization = `Bearer ${BENCH_API_KEY}`;
  const held: ServerResponse[] = [];
  const sockets = new Set<Socket>();
  const listen = () =>
    new Promise<number>((resolve) => {
      const server = createServer({ keepAliveTimeout: 30_000 }, (req, res) => {
        req.resume();
        if (req.method !== 'GET' || !/^\/v1\/runs\/[^/]+\/events$/.test(req.url ?? '') || req.headers.authorization !== authorization) {
          res.writeHead(404, { 'content-type': 'application/json' }).end('{"error": {"message": "Not found"}}');
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        res.flushHeaders();
        held.push(res);
      });
      server.on('connection', (socket: Socket) => {
        sockets.add(socket);
        socket.once('close', () => sockets.delete(socket));
      });
      server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port));
    });
  const ports: number[] = [];
  for (let index = 0; index < endpoints; index++) ports.push(await listen());
  const bodies = new Map<number, Buffer>();
  process.on('disconnect', () => process.exit(0));
  process.on('message', (message: ScaleRequest | { type: 'origins' }) => {
    if (message.type === 'origins') return void process.send?.({ origins: ports.map((port) => `http://127.0.0.1:${port}`) });
    if (message.type === 'held') return void process.send?.({ count: held.length });
    if (message.type === 'sockets') return void process.send?.({ count: sockets.size });
    const body = bodies.get(message.deltas) ?? renderStream(message.deltas);
    bodies.set(message.deltas, body);
    const released = held.splice(0);
    for (const res of released) res.end(body);
    process.send?.({ count: released.length });
  });
  process.send?.({ port: ports[0] });
}

const flag = process.argv[2] ?? '';
if (flag.startsWith('--scale-server=')) void serve(Number(flag.slice('--scale-server='.length)));
