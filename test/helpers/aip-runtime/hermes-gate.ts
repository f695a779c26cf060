/**
 * A pass-through proxy in front of the Hermes simulator that can hold the answers to
 * `POST /v1/runs` until released: a host behind it has started a run on Hermes but cannot
 * answer its runtime yet, so the runtime's request times out with the run already started.
 */
import { EventEmitter } from 'node:events';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface HermesGate {
  readonly url: string;
  /** While true, answers to `POST /v1/runs` wait for `release()`. */
  holdStarts: boolean;
  /** Resolves once a held start has reached Hermes and its answer is waiting. */
  nextHeld(): Promise<void>;
  /** Lets every held answer through. */
  release(): void;
  close(): Promise<void>;
}

export async function startHermesGate(target: string): Promise<HermesGate> {
  const upstream = new URL(target);
  const events = new EventEmitter();
  const held: Array<() => void> = [];
  const sockets = new Set<Socket>();
  const state = { holdStarts: false };
  const server = createServer((req, res) => {
    const hold = state.holdStarts && req.method === 'POST' && req.url === '/v1/runs';
    const outgoing = httpRequest({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      const pass = () => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      };
      if (!hold) return pass();
      held.push(pass);
      events.emit('held');
    });
    outgoing.on('error', () => res.destroy());
    req.pipe(outgoing);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get holdStarts() {
      return state.holdStarts;
    },
    set holdStarts(value: boolean) {
      state.holdStarts = value;
    },
    nextHeld: () => new Promise((resolve) => events.once('held', () => resolve())),
    release: () => {
      for (const pass of held.splice(0)) pass();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
