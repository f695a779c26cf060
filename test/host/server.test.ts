/** The host's HTTP surface: routes and statuses as the reference's axum router, and a peer's fault never taking it down. */
import { connect, type Socket } from 'node:net';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { HostStatus } from '../../src/host/metrics.js';
import { createHostServer, type HostRequest, type HostServer } from '../../src/host/server.js';
import { deferred } from '../helpers/deferred.js';

const LIMIT = 4 * 1024 * 1024;

interface Harness {
  base: string;
  port: number;
  received: HostRequest[];
  host: HostServer;
}

const servers: HostServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close(0)));
});

interface HarnessOptions {
  bodyTimeoutMs?: number;
  ready?: boolean;
  maxRequestBytes?: number;
  maxConnections?: number;
  largeBodyBytes?: number;
  bodyBudgetBytes?: number;
  /** Awaited before each answer: lets a test hold the handler. */
  gate?: (request: HostRequest) => Promise<void>;
}

async function startHost(options: HarnessOptions = {}): Promise<Harness> {
  const received: HostRequest[] = [];
  const status = new HostStatus();
  const { bodyTimeoutMs, maxConnections, largeBodyBytes, bodyBudgetBytes } = options;
  const host = createHostServer({
    status,
    messages: {
      async handle(request) {
        received.push(request);
        await options.gate?.(request);
        return { status: 200, body: JSON.stringify({ bytes: request.body.length }) };
      },
    },
    manifestText: '{"manifest_version":"aip-manifest/v1"}',
    ready: async () => ({ ready: options.ready ?? false, body: { status: options.ready ? 'ready' : 'not_ready' } }),
    maxRequestBytes: options.maxRequestBytes ?? LIMIT,
    logger: pino({ level: 'silent' }),
    ...(bodyTimeoutMs === undefined ? {} : { bodyTimeoutMs }),
    ...(maxConnections === undefined ? {} : { maxConnections }),
    ...(largeBodyBytes === undefined ? {} : { largeBodyBytes }),
    ...(bodyBudgetBytes === undefined ? {} : { bodyBudgetBytes }),
  });
  servers.push(host);
  const address = await host.listen('127.0.0.1', 0);
  return { base: `http://127.0.0.1:${address.port}`, port: address.port, received, host };
}

/** Sends raw bytes and resolves with everything the server wrote before closing (or the first response head, with `untilHead`). */
function rawExchange(port: number, write: (socket: Socket) => void, untilHead = false): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let seen = '';
    socket.setEncoding('utf8');
    socket.on('data', (data: string) => {
      seen += data;
      if (untilHead && seen.includes('\r\n\r\n')) {
        socket.destroy();
        resolve(seen);
      }
    });
    socket.on('error', (error) => (seen === '' ? reject(error) : resolve(seen)));
    socket.on('close', () => resolve(seen));
    socket.on('connect', () => write(socket));
  });
}

describe('host routes', () => {
  it('answers /health with the reference body, always 200', async () => {
    const { base } = await startHost();
    const response = await fetch(`${base}/health`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(await response.text()).toBe('{"status":"ok","protocol":"AIP","version":"1.0","service":"aip-connector-host"}');
  });

  it('answers /ready 503 when not ready and 200 when ready', async () => {
    const notReady = await startHost({ ready: false });
    expect((await fetch(`${notReady.base}/ready`)).status).toBe(503);
    const ready = await startHost({ ready: true });
    const response = await fetch(`${ready.base}/ready`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ready' });
  });

  it('serves /metrics with exactly the reference metric names and types', async () => {
    const { base } = await startHost();
    const response = await fetch(`${base}/metrics`);
    expect(response.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const text = await response.text();
    const names = [...text.matchAll(/^(aip_connector_host_\w+) (\d+)$/gm)].map((match) => match[1]);
    expect(names).toEqual([
      'aip_connector_host_ready',
      'aip_connector_host_storage_ready',
      'aip_connector_host_in_flight',
      'aip_connector_host_requests_total',
      'aip_connector_host_rejected_total',
      'aip_connector_host_heartbeat_failures_total',
      'aip_connector_host_lease_recovery_attempts_total',
      'aip_connector_host_lease_recoveries_total',
    ]);
    expect(text).toContain('# TYPE aip_connector_host_ready gauge\n');
    expect(text).toContain('# TYPE aip_connector_host_requests_total counter\n');
  });

  it('answers an unknown path 404 and another method 405 with allow, as axum', async () => {
    const { base } = await startHost();
    const missing = await fetch(`${base}/aip/v1/messages/`, { method: 'POST', body: '{}' });
    expect(missing.status).toBe(404);
    expect(await missing.text()).toBe('');
    const getMessages = await fetch(`${base}/aip/v1/messages`);
    expect(getMessages.status).toBe(405);
    expect(getMessages.headers.get('allow')).toBe('POST');
    const postHealth = await fetch(`${base}/health`, { method: 'POST', body: '' });
    expect(postHealth.status).toBe(405);
    expect(postHealth.headers.get('allow')).toBe('GET,HEAD');
    const head = await fetch(`${base}/health`, { method: 'HEAD' });
    expect(head.status).toBe(200);
  });

  it('passes a body of exactly 4 MiB to the message handler', async () => {
    const { base, received } = await startHost();
    const response = await fetch(`${base}/aip/v1/messages`, {
      method: 'POST',
      body: Buffer.alloc(LIMIT, 0x20),
      headers: { 'content-type': 'application/json' },
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ bytes: LIMIT });
    expect(received).toHaveLength(1);
  });
});

describe('hostile peers', () => {
  it('refuses a declared body over 4 MiB with 413 before a byte of it is sent', async () => {
    const { port, received } = await startHost();
    const head = await rawExchange(
      port,
      (socket) => socket.write(`POST /aip/v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${LIMIT + 1}\r\n\r\n`),
      true,
    );
    expect(head).toMatch(/^HTTP\/1\.1 413 /);
    expect(received).toHaveLength(0);
  });

  it('refuses a chunked body once the bytes received pass 4 MiB', async () => {
    const { port, received, base } = await startHost();
    const chunk = Buffer.alloc(256 * 1024, 0x20);
    const answer = await rawExchange(port, (socket) => {
      socket.write('POST /aip/v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
      const sendChunks = (left: number): void => {
        if (left === 0 || socket.destroyed) return;
        socket.write(`${chunk.length.toString(16)}\r\n`);
        socket.write(chunk);
        socket.write('\r\n', () => sendChunks(left - 1));
      };
      sendChunks(20);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer).toContain('Failed to buffer the request body: length limit exceeded');
    expect(received).toHaveLength(0);
    expect((await fetch(`${base}/health`)).status).toBe(200);
  });

  it('answers 408 to a body that stops arriving, and keeps serving', async () => {
    const { port, received, base } = await startHost({ bodyTimeoutMs: 300 });
    const answer = await rawExchange(port, (socket) => {
      socket.write('POST /aip/v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"aip_');
    });
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(received).toHaveLength(0);
    expect((await fetch(`${base}/health`)).status).toBe(200);
  });

  it('survives garbage on the socket and a client that resets mid-body', async () => {
    const { port, received, base } = await startHost();
    const garbage = await rawExchange(port, (socket) => socket.write('\x00\x01GARBAGE / NOT-HTTP\r\n\r\n'));
    expect(garbage).toMatch(/^HTTP\/1\.1 400 /);
    await rawExchange(port, (socket) => {
      socket.write('POST /aip/v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"half":', () => socket.resetAndDestroy());
    });
    expect((await fetch(`${base}/health`)).status).toBe(200);
    expect(received).toHaveLength(0);
  });

  it('still answers /health with a thousand connections open, and answers a thousand concurrent requests', async () => {
    const { port, base } = await startHost();
    const idle = await Promise.all(
      Array.from(
        { length: 1000 },
        () =>
          new Promise<Socket>((resolve, reject) => {
            const socket = connect(port, '127.0.0.1', () => {
              socket.write('GET /health HTTP/1.1\r\nHost: x\r\n');
              resolve(socket);
            });
            socket.on('error', reject);
          }),
      ),
    );
    try {
      expect((await fetch(`${base}/health`)).status).toBe(200);
      const statuses = await Promise.all(
        Array.from({ length: 1000 }, () =>
          rawExchange(port, (socket) => socket.write('GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')).then((text) => text.slice(0, 12)),
        ),
      );
      expect(new Set(statuses)).toEqual(new Set(['HTTP/1.1 200']));
    } finally {
      for (const socket of idle) socket.destroy();
    }
  });
});

describe("limits of our own (not the reference host's)", () => {
  const post = (base: string, bytes: number) =>
    fetch(`${base}/aip/v1/messages`, { method: 'POST', body: Buffer.alloc(bytes, 0x20), headers: { 'content-type': 'application/json' } });
  /** A 64 KiB request limit and body budget, bodies over 1 KiB large, a 400 ms body bound; `gate` holds answers. */
  const startBudgetHost = (gate: HarnessOptions['gate']) =>
    startHost({ maxRequestBytes: 64 * 1024, largeBodyBytes: 1024, bodyBudgetBytes: 64 * 1024, bodyTimeoutMs: 400, gate });

  it('reads a large body only within the body budget: it waits unread, 408 when the wait outlasts the body bound; small bodies never wait', async () => {
    const { promise: held, resolve: open } = deferred();
    // A budget of 64 KiB (the request limit): the first large body takes 60 KiB of it until it is answered.
    const { base, port, received } = await startBudgetHost((request) => (request.body.length === 60 * 1024 ? held : Promise.resolve()));
    const first = post(base, 60 * 1024);
    await waitFor(() => received.length === 1);
    // 10 KiB more does not fit: its body is not read, and the body bound answers it.
    const waiting = await rawExchange(port, (socket) => {
      socket.write(`POST /aip/v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${10 * 1024}\r\n\r\n`);
      socket.write(Buffer.alloc(10 * 1024, 0x20));
    });
    expect(waiting).toMatch(/^HTTP\/1\.1 408 /);
    // A small body is read at once, budget or not.
    expect((await post(base, 1000)).status).toBe(200);
    expect(received.map((request) => request.body.length)).toEqual([60 * 1024, 1000]);
    open();
    expect((await first).status).toBe(200);
    // Answered: its share is back, and the next large body is read.
    expect(await (await post(base, 10 * 1024)).json()).toEqual({ bytes: 10 * 1024 });
  });

  it('a chunked body pauses at the large-body threshold until the request limit is reserved', async () => {
    const { promise: held, resolve: open } = deferred();
    const { base, port, received } = await startBudgetHost(() => held);
    const first = post(base, 2000);
    await waitFor(() => received.length === 1);
    const chunked = await rawExchange(port, (socket) => {
      socket.write('POST /aip/v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
      socket.write(`${(4000).toString(16)}\r\n${' '.repeat(4000)}\r\n0\r\n\r\n`);
    });
    expect(chunked).toMatch(/^HTTP\/1\.1 408 /);
    expect(received).toHaveLength(1);
    open();
    expect((await first).status).toBe(200);
  });

  it('closes a connection beyond maxConnections as soon as it is accepted, and serves again once one closes', async () => {
    const { port, base, host } = await startHost({ maxConnections: 2 });
    const connections = () => new Promise<number>((resolve) => host.server.getConnections((_error, count) => resolve(count)));
    const held = await Promise.all(
      [0, 1].map(
        () =>
          new Promise<Socket>((resolve, reject) => {
            const socket = connect(port, '127.0.0.1', () => resolve(socket));
            socket.on('error', reject);
          }),
      ),
    );
    await waitFor(async () => (await connections()) === 2);
    const refused = await rawExchange(port, (socket) => socket.write('GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')).catch(
      (error: NodeJS.ErrnoException) => error.code ?? 'error',
    );
    expect(refused).not.toMatch(/^HTTP\/1\.1 200/);
    held[0]?.destroy();
    await waitFor(async () => (await fetch(`${base}/health`).catch(() => undefined))?.status === 200);
    held[1]?.destroy();
  });
});

async function waitFor(condition: () => boolean | Promise<boolean>): Promise<void> {
  for (let tries = 0; !(await condition()); tries++) {
    if (tries > 500) throw new Error('condition not met within 10 s');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
