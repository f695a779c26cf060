/**
 * The host bench's wire floor: a node:http server in the bench process, as the host's server is, that
 * reads each POST body and answers a fixed body of the size the host answers, doing nothing else. Its
 * CPU per request is what being reached over HTTP costs a host before it does any work.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface EchoServer {
  readonly origin: string;
  close(): Promise<void>;
}

export async function startEchoServer(answerBytes: number): Promise<EchoServer> {
  const answer = Buffer.alloc(answerBytes, 'x');
  const server = createServer({ keepAliveTimeout: 30_000 }, (req, res) => {
    req.resume();
    req.once('end', () => res.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.length }).end(answer));
  });
  return listenOnLoopback(server);
}

/** Listens on a free loopback port; `close` also ends the kept-alive connections the driver holds open. */
export async function listenOnLoopback(server: Server): Promise<EchoServer> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
