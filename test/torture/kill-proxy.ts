/**
 * An HTTP proxy on 127.0.0.1:0 in front of a simulator that lets the torture kill the child at
 * an exact moment: once armed, the first request that matches is held, either before the
 * simulator sees it (`before`) or after the simulator answered but before the answer goes back
 * (`after`), and `held` resolves so the parent can SIGKILL the child. The held exchange is then
 * dropped. Every other request passes through untouched, streams included.
 */
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ProxiedRequest {
  method: string;
  path: string;
  body: string;
}

export type HoldPhase = 'before' | 'after';

export interface KillProxy {
  readonly url: string;
  /** Holds the next matching request at `phase`; resolves once it is held. */
  arm(matches: (request: ProxiedRequest) => boolean, phase: HoldPhase): Promise<void>;
  disarm(): void;
  close(): Promise<void>;
}

interface Trap {
  matches: (request: ProxiedRequest) => boolean;
  phase: HoldPhase;
  held: () => void;
}

export function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

export async function startKillProxy(target: string): Promise<KillProxy> {
  const upstream = new URL(target);
  let trap: Trap | undefined;
  const forward = (req: IncomingMessage, body: Buffer, onAnswer: (answer: IncomingMessage) => void, res: ServerResponse) => {
    const outgoing = httpRequest({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, onAnswer);
    outgoing.on('error', () => res.destroy());
    outgoing.end(body);
  };
  const server = createServer((req, res) => {
    readBody(req).then(
      (body) => {
        const request = { method: req.method ?? '', path: req.url ?? '', body: body.toString('utf8') };
        const caught = trap?.matches(request) ? trap : undefined;
        if (caught) trap = undefined;
        if (caught?.phase === 'before') return caught.held();
        forward(
          req,
          body,
          (answer) => {
            if (!caught) {
              res.writeHead(answer.statusCode ?? 502, answer.headers);
              answer.pipe(res);
              return;
            }
            // The simulator answered; the answer is read in full and never relayed.
            answer.resume();
            answer.on('end', () => caught.held());
          },
          res,
        );
      },
      () => res.destroy(),
    );
  });
  const { origin, close } = await listenOnLoopback(server);
  return {
    url: origin,
    arm: (matches, phase) => new Promise<void>((held) => (trap = { matches, phase, held })),
    disarm: () => {
      trap = undefined;
    },
    close,
  };
}

/** Listens on 127.0.0.1:0; `close` also ends the connections still open (held requests among them). */
export async function listenOnLoopback(server: Server): Promise<{ origin: string; close(): Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
