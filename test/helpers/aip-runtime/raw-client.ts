/**
 * Hostile clients on raw sockets: a request whose declared body is never (or slowly) sent,
 * a chunked body of any size, many connections at once, and the host child's resident memory.
 */
import { readFileSync } from 'node:fs';
import { request as httpRequest, Agent } from 'node:http';
import { connect, type Socket } from 'node:net';

/** Writes the head and the first `sent` bytes of a body declared as `declared` bytes; resolves with the status line that comes back (or '' when the host closed). */
export function partialBody(port: number, path: string, declared: number, sent: Buffer, timeoutMs = 10_000): Promise<{ statusLine: string; socket: Socket }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms to a ${declared}-byte body of which ${sent.length} bytes were sent`));
    }, timeoutMs);
    const done = () => {
      clearTimeout(timer);
      resolve({ statusLine: answer.split('\r\n')[0] ?? '', socket });
    };
    socket.on('data', (data) => {
      answer += data.toString('latin1');
      if (answer.includes('\r\n')) done();
    });
    socket.on('close', done);
    socket.on('error', () => {});
    socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n`);
    socket.write(sent);
  });
}

/** POSTs `total` bytes of `filler` as a chunked body; resolves with the status (0 when the host cut the connection first). */
export function chunkedBody(port: number, path: string, total: number, filler = 'x'): Promise<number> {
  return new Promise((resolve) => {
    const request = httpRequest(
      { host: '127.0.0.1', port, method: 'POST', path, headers: { 'content-type': 'application/json' }, agent: false },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode ?? 0));
        response.on('error', () => resolve(response.statusCode ?? 0));
      },
    );
    request.on('error', () => resolve(0));
    const piece = Buffer.alloc(64 * 1024, filler);
    let written = 0;
    const pump = () => {
      while (written < total) {
        written += piece.length;
        if (!request.write(piece)) {
          request.once('drain', pump);
          return;
        }
      }
      request.end();
    };
    pump();
  });
}

/** `count` GETs at once, each on its own connection; the statuses (0 for a connection error). */
export async function concurrentGets(url: string, count: number): Promise<number[]> {
  const agent = new Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
  try {
    return await Promise.all(
      Array.from(
        { length: count },
        () =>
          new Promise<number>((resolve) => {
            const request = httpRequest(url, { agent }, (response) => {
              response.resume();
              response.on('end', () => resolve(response.statusCode ?? 0));
            });
            request.on('error', () => resolve(0));
            request.end();
          }),
      ),
    );
  } finally {
    agent.destroy();
  }
}

/** Resident set size of a process, from /proc (Linux). */
export function residentBytes(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`no VmRSS for process ${pid}`);
  return Number(match[1]) * 1024;
}
