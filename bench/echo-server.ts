/**
 * The host bench's wire floor: a node:http server in its own process that reads each POST body
 * and answers a fixed body of the size the host answers, doing nothing else. Its CPU per request
 * is what being reached over HTTP costs a remote host before it does any work.
 */
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import { forkServer } from './ledger-server.js';

export const startEchoServer = (answerBytes: number) => forkServer(fileURLToPath(import.meta.url), `--echo-server=${answerBytes}`);

function serve(answerBytes: number): void {
  const answer = Buffer.alloc(answerBytes, 'x');
  const server = createServer({ keepAliveTimeout: 30_000 }, (req, res) => {
    req.resume();
    req.once('end', () => res.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.length }).end(answer));
  });
  process.on('disconnect', () => process.exit(0));
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('unexpected server address');
    process.send?.({ port: address.port });
  });
}

const flag = process.argv[2]?.match(/^--echo-server=(\d+)$/);
if (flag) serve(Number(flag[1]));
