/**
 * Hostile clients on raw sockets: a request whose declared body is never (or slowly) sent,
 * a chunked body of any size, many connections at once, and the host child's resident memory
 * and open sockets.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
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

/** One POST on a connection of its own (no pool); status 0 and no text when no answer arrived. */
export function postOnOwnConnection(url: string, headers: Record<string, string>, body: string | Uint8Array): Promise<{ status: number; text: string }> {
  return new Promise((resolve) => {
    const request = httpRequest(url, { method: 'POST', headers, agent: false }, (response) => {
      const parts: Buffer[] = [];
      response.on('data', (part: Buffer) => parts.push(part));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(parts).toString('utf8') }));
      response.on('error', () => resolve({ status: 0, text: '' }));
    });
    request.on('error', () => resolve({ status: 0, text: '' }));
    request.end(body);
  });
}

/** A request whose body arrives in `pieces` parts `gapMs` apart; resolves with the status line's code (0 when none came). */
export async function trickledBody(port: number, path: string, body: string, pieces: number, gapMs: number): Promise<number> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  let answer = '';
  const answered = new Promise<number>((resolve) => {
    socket.on('data', (data) => {
      answer += data.toString('latin1');
      const code = /^HTTP\/1\.1 (\d{3}) /.exec(answer);
      if (code) resolve(Number(code[1]));
    });
    socket.on('close', () => resolve(0));
  });
  const bytes = Buffer.from(body, 'utf8');
  socket.write(
    `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${bytes.length}\r\nConnection: close\r\n\r\n`,
  );
  const size = Math.ceil(bytes.length / pieces);
  for (let offset = 0; offset < bytes.length; offset += size) {
    await sleep(gapMs);
    socket.write(bytes.subarray(offset, offset + size));
  }
  const status = await answered;
  socket.destroy();
  return status;
}

/** The highest resident set size a process has had so far (VmHWM, Linux): its true peak, not a sample. */
export function peakResidentBytes(pid: number): number {
  const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`no VmHWM for process ${pid}`);
  return Number(match[1]) * 1024;
}

/** Open sockets of a process: its file descriptors that are sockets (Linux). */
export function openSockets(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).filter((fd) => {
    try {
      return readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:');
    } catch {
      return false;
    }
  }).length;
}
