/**
 * The ledger bench's Hermes stand-in: `POST /v1/runs` answered 202 with a new run id, as Hermes
 * answers, and nothing else. Like servers.ts it runs in a child process (the other core), so the
 * figures measure the client side. `forkServer` is shared with the scale bench's server.
 */
import { fork } from 'node:child_process';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import { BENCH_API_KEY } from './servers.js';

export interface ForkedServer {
  readonly origin: string;
  readonly pid: number;
  /** Sends a message to the server process and resolves with its answer. */
  ask<T>(message: Record<string, unknown>): Promise<T>;
  close(): Promise<void>;
}

/** Forks `file` with `flag`, under the same tsx loader, and waits for its `{ port }` message. */
export async function forkServer(file: string, flag: string): Promise<ForkedServer> {
  const execArgv = process.execArgv.filter((arg) => !/^--(cpu|heap)-prof/.test(arg) && arg !== '--expose-gc');
  const child = fork(file, [flag], { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const next = <T>() =>
    new Promise<T>((resolve, reject) => {
      const onExit = () => reject(new Error(`${flag} server exited unexpectedly`));
      child.once('exit', onExit);
      child.once('message', (message) => {
        child.off('exit', onExit);
        resolve(message as T);
      });
    });
  const { port } = await next<{ port: number }>();
  return {
    origin: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    ask<T>(message: Record<string, unknown>) {
      const answer = next<T>();
      child.send(message);
      return answer;
    },
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill();
      await exited;
    },
  };
}

/** Starts the run-start server in its own process. */
export const startLedgerServer = () => forkServer(fileURLToPath(import.meta.url), '--ledger-server');

function serve(): void {
  const authorization = `Bearer ${BENCH_API_KEY}`;
  let runs = 0;
  const server = createServer({ keepAliveTimeout: 30_000 }, (req, res) => {
    req.resume();
    req.once('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/runs' || req.headers.authorization !== authorization) {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"error": {"message": "Not found"}}');
        return;
      }
      const body = `{"run_id": "run_${(++runs).toString(16).padStart(32, '0')}", "status": "started"}`;
      res.writeHead(202, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) }).end(body);
    });
  });
  process.on('disconnect', () => process.exit(0));
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('unexpected server address');
    process.send?.({ port: address.port });
  });
}

if (process.argv[2] === '--ledger-server') serve();
