/**
 * The bench's own Hermes stand-in: a minimal node:http server on 127.0.0.1:0 that answers
 *   GET /health                 with {"status": "ok"} (no key), and
 *   GET /v1/runs/{id}          with one fixed Hermes status object (the capture's shape), and
 *   GET /v1/runs/stream-{n}[-suffix]/events  with a pre-rendered SSE body of n `message.delta`
 *                               frames, then `run.completed`, then `: stream closed`.
 * Every body is rendered once, when the server starts, so the baseline and the connector read
 * byte-identical responses from the same server, and the server does no per-request work
 * beyond routing. It runs in a child process (forked with the same tsx loader) so that its
 * CPU time lands on the other core and its heap never shows in the client's heap figures.
 * It counts the sockets it holds open, for the "no socket left open" check.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';

export const BENCH_API_KEY = 'hk_bench_key_0123456789abcdef';
export const STATUS_RUN_ID = 'run_6a1f0c2e9b7d4f3a8c5e1b2d7f9a0c3e';
const STREAM_RUN_ID = 'run_d1d361d6646c4f4db2bf950d124a8fc4';

/** The words the deltas cycle through (ASCII, plus one that Python's ensure_ascii escapes). */
const WORDS = [
  'The ',
  'disk ',
  'check ',
  'found ',
  'nothing ',
  'unusual; ',
  'caf\u00e9 ',
  'logs ',
  'rotated ',
  'at ',
  '03:00. ',
  'Next, ',
  'the ',
  'build ',
  'cache',
];

/** The i-th delta text of every bench stream. */
export function deltaAt(index: number): string {
  return WORDS[index % WORDS.length] as string;
}

/** The `text` an aggregation of `deltas` message.delta events must produce. */
export function expectedText(deltas: number): string {
  const parts: string[] = [];
  for (let i = 0; i < deltas; i++) parts.push(deltaAt(i));
  return parts.join('');
}

/** Python json.dumps of a string with the default ensure_ascii=True. */
function pyString(value: string): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function timestamp(index: number): string {
  return (1796032842 + index * 0.000137).toFixed(6);
}

/** One Hermes stream, byte for byte as Hermes frames it: `data: <json.dumps(event)>\n\n`. */
export function renderStream(deltas: number): Buffer {
  const frames: string[] = [];
  for (let i = 0; i < deltas; i++) {
    frames.push(`data: {"event": "message.delta", "run_id": "${STREAM_RUN_ID}", "timestamp": ${timestamp(i)}, "delta": ${pyString(deltaAt(i))}}\n\n`);
  }
  frames.push(
    `data: {"event": "run.completed", "run_id": "${STREAM_RUN_ID}", "timestamp": ${timestamp(deltas)}, "output": "done", "usage": {"input_tokens": 12, "output_tokens": ${deltas}, "total_tokens": ${deltas + 12}}}\n\n`,
  );
  frames.push(': stream closed\n\n');
  return Buffer.from(frames.join(''), 'utf8');
}

export function renderStatus(): Buffer {
  return Buffer.from(
    `{"object": "hermes.run", "run_id": "${STATUS_RUN_ID}", "status": "completed", "updated_at": 1796032842.716812, "created_at": 1796032842.0053885, "session_id": "bench-session", "model": "hermes-agent", "last_event": "run.completed", "output": "Removed ./build.", "usage": {"input_tokens": 12, "output_tokens": 5, "total_tokens": 17}}`,
    'utf8',
  );
}

/** The run id that selects the pre-rendered stream of `deltas` deltas (a suffix keeps ids distinct). */
export function streamRunId(deltas: number, suffix?: string | number): string {
  return suffix === undefined ? `stream-${deltas}` : `stream-${deltas}-${suffix}`;
}

// ---------------------------------------------------------------------------------------------
// Parent side

type ToServer = { type: 'sockets' } | { type: 'reset-peak' } | { type: 'close' };
type FromServer =
  | { type: 'ready'; port: number; streamBytes: Record<string, number> }
  | { type: 'sockets'; open: number; peak: number; accepted: number; requests: number };

export interface SocketCounts {
  /** Sockets the server holds open right now. */
  open: number;
  /** The most sockets it held open at once since the last resetPeak(). */
  peak: number;
  /** Connections accepted since start. */
  accepted: number;
  requests: number;
}

export interface BenchServer {
  readonly origin: string;
  /** Size in bytes of each pre-rendered stream body, by delta count. */
  readonly streamBytes: ReadonlyMap<number, number>;
  sockets(): Promise<SocketCounts>;
  resetPeak(): Promise<void>;
  close(): Promise<void>;
}

/** Forks the server process, waits until it listens on 127.0.0.1, and returns its handle. */
export async function startBenchServer(streams: readonly number[]): Promise<BenchServer> {
  // The child runs this same file under the same tsx loader; profiler flags stay with the parent.
  const execArgv = process.execArgv.filter((arg) => !/^--(cpu|heap)-prof/.test(arg) && arg !== '--expose-gc');
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), ['--bench-server', JSON.stringify(streams)], {
    execArgv,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const waiters: Array<(message: FromServer) => void> = [];
  child.on('message', (message: FromServer) => waiters.shift()?.(message));
  const next = () =>
    new Promise<FromServer>((resolve, reject) => {
      const onExit = () => reject(new Error('bench server exited unexpectedly'));
      child.once('exit', onExit);
      waiters.push((message) => {
        child.off('exit', onExit);
        resolve(message);
      });
    });
  const ready = await next();
  if (ready.type !== 'ready') throw new Error('bench server did not start');
  const ask = async (message: ToServer): Promise<FromServer> => {
    const answer = next();
    child.send(message);
    return answer;
  };
  return {
    origin: `http://127.0.0.1:${ready.port}`,
    streamBytes: new Map(Object.entries(ready.streamBytes).map(([deltas, bytes]) => [Number(deltas), bytes])),
    async sockets() {
      const answer = await ask({ type: 'sockets' });
      if (answer.type !== 'sockets') throw new Error('unexpected answer from the bench server');
      return { open: answer.open, peak: answer.peak, accepted: answer.accepted, requests: answer.requests };
    },
    async resetPeak() {
      await ask({ type: 'reset-peak' });
    },
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.send({ type: 'close' } satisfies ToServer);
      const timer = setTimeout(() => child.kill(), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Child side

function serve(streams: readonly number[]): void {
  const status = renderStatus();
  const bodies = new Map(streams.map((deltas) => [deltas, renderStream(deltas)]));
  const authorization = `Bearer ${BENCH_API_KEY}`;
  const open = new Set<Socket>();
  let peak = 0;
  let accepted = 0;
  let requests = 0;

  const send = (res: ServerResponse, code: number, type: string, body: Buffer, length: boolean) => {
    const headers: Record<string, string | number> = { 'content-type': type };
    if (length) headers['content-length'] = body.length;
    else headers['cache-control'] = 'no-cache';
    res.writeHead(code, headers);
    res.end(body);
  };
  const notFound = Buffer.from('{"error": {"message": "Run not found", "type": "invalid_request_error", "code": "run_not_found"}}');

  const server = createServer({ keepAliveTimeout: 30_000 }, (req: IncomingMessage, res: ServerResponse) => {
    requests++;
    req.resume();
    // Hermes' health check needs no key; the AIP host's readiness probe calls it.
    if (req.method === 'GET' && req.url === '/health') return send(res, 200, 'application/json', Buffer.from('{"status": "ok"}'), true);
    if (req.method !== 'GET' || req.headers.authorization !== authorization) {
      send(res, 401, 'application/json', Buffer.from('{"error": {"message": "Invalid API key", "code": "invalid_api_key"}}'), true);
      return;
    }
    const match = /^\/v1\/runs\/([^/?]+)(\/events)?$/.exec(req.url ?? '');
    if (!match) return send(res, 404, 'application/json', notFound, true);
    if (!match[2]) return send(res, 200, 'application/json; charset=utf-8', status, true);
    const deltas = /^stream-(\d+)(?:-[\w.-]+)?$/.exec(match[1] ?? '');
    const body = deltas ? bodies.get(Number(deltas[1])) : undefined;
    if (!body) return send(res, 404, 'application/json', notFound, true);
    send(res, 200, 'text/event-stream', body, false);
  });
  server.on('connection', (socket: Socket) => {
    accepted++;
    open.add(socket);
    peak = Math.max(peak, open.size);
    socket.once('close', () => open.delete(socket));
  });
  const shutdown = () => {
    server.close();
    for (const socket of open) socket.destroy();
    process.exit(0);
  };
  process.on('disconnect', shutdown);
  process.on('message', (message: ToServer) => {
    const reply = (answer: FromServer) => process.send?.(answer);
    if (message.type === 'close') shutdown();
    else if (message.type === 'reset-peak') {
      peak = open.size;
      reply({ type: 'sockets', open: open.size, peak, accepted, requests });
    } else reply({ type: 'sockets', open: open.size, peak, accepted, requests });
  });
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('unexpected server address');
    process.send?.({
      type: 'ready',
      port: address.port,
      streamBytes: Object.fromEntries([...bodies].map(([deltas, body]) => [String(deltas), body.length])),
    } satisfies FromServer);
  });
}

if (process.argv[2] === '--bench-server') serve(JSON.parse(process.argv[3] ?? '[]') as number[]);
