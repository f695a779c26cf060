/**
 * A pass-through HTTP proxy on 127.0.0.1:0 in front of a real server: it records every request
 * (method and path), and can cut the next event stream after its first SSE event (the response
 * ends cleanly at the proxy, and the upstream connection is dropped, as a vanished subscriber), or
 * lose the answer to the next run start (the server answers in full, the client's socket is destroyed).
 */
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordingProxy {
  readonly url: string;
  /** `METHOD /path` of every request, in arrival order. */
  readonly requests: string[];
  /** The next `GET …/events` is ended after its first complete event frame (and any comment frame before it, such as 0.22's `: open`). */
  cutNextStreamAfterFirstFrame(): void;
  /**
   * The next `POST /v1/runs` reaches the server, which answers; the answer is read and then the
   * client's socket destroyed (`destroy`), or the client is never answered (`hold`, until close()).
   */
  loseNextStartAnswer(how?: 'destroy' | 'hold'): void;
  /** The body of every answer to `POST /v1/runs`, lost ones included, in arrival order. */
  readonly startAnswers: string[];
  close(): Promise<void>;
}

export async function startRecordingProxy(target: string): Promise<RecordingProxy> {
  const upstream = new URL(target);
  const requests: string[] = [];
  const startAnswers: string[] = [];
  let cutNext = false;
  let loseNextStart: 'destroy' | 'hold' | undefined;
  const server = createServer((req, res) => {
    requests.push(`${req.method ?? ''} ${req.url ?? ''}`);
    const cut = cutNext && req.method === 'GET' && (req.url ?? '').endsWith('/events');
    if (cut) cutNext = false;
    const start = req.method === 'POST' && req.url === '/v1/runs';
    const lose = start ? loseNextStart : undefined;
    if (lose) loseNextStart = undefined;
    const outgoing = httpRequest({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      if (start) recordBody(answer, startAnswers, lose === 'destroy' ? () => res.destroy() : undefined);
      if (cut) relayFirstFrame(answer, res);
      else if (!lose) relay(answer, res);
    });
    outgoing.on('error', () => res.destroy());
    req.pipe(outgoing);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    startAnswers,
    cutNextStreamAfterFirstFrame: () => {
      cutNext = true;
    },
    loseNextStartAnswer: (how = 'destroy') => {
      loseNextStart = how;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Keeps a copy of the answer's body; `then` runs once all of it arrived. */
function recordBody(answer: IncomingMessage, into: string[], then: (() => void) | undefined): void {
  const chunks: Buffer[] = [];
  answer.on('data', (chunk: Buffer) => chunks.push(chunk));
  answer.on('end', () => {
    into.push(Buffer.concat(chunks).toString('utf8'));
    then?.();
  });
}

function relay(answer: IncomingMessage, res: ServerResponse): void {
  res.writeHead(answer.statusCode ?? 502, answer.headers);
  answer.pipe(res);
}

/** Forwards the head and the frames up to the first `\n\n`-terminated event frame, then ends the response and drops upstream. */
function relayFirstFrame(answer: IncomingMessage, res: ServerResponse): void {
  res.writeHead(answer.statusCode ?? 502, answer.headers);
  let buffered = '';
  answer.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    const end = endOfFirstEvent(buffered);
    if (end === undefined || res.writableEnded) return;
    res.end(buffered.slice(0, end));
    answer.destroy();
  });
  answer.on('end', () => res.end());
}

/** Where the first frame with a field line (not only `:` comments) ends, once it is complete. */
function endOfFirstEvent(text: string): number | undefined {
  let start = 0;
  for (;;) {
    const end = text.indexOf('\n\n', start);
    if (end === -1) return undefined;
    if (
      text
        .slice(start, end)
        .split('\n')
        .some((line) => line !== '' && !line.startsWith(':'))
    )
      return end + 2;
    start = end + 2;
  }
}
