/**
 * A TCP proxy in front of PostgreSQL that makes one exact moment happen on demand: the first
 * connection through it has its backend ended (by `endBackend`, e.g. pg_terminate_backend) just
 * as its start-up completes, and the client gets the backend's ReadyForQuery and its FATAL
 * ErrorResponse in ONE read, as a loaded machine sometimes delivers them. pg then hands the
 * client to whoever waits for it and, in the same read, reports the backend's end. Later
 * connections pass through untouched. Bytes are only held back and regrouped, never made up.
 */
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

export interface CoalescingProxy {
  port: number;
  /** The server's bytes the first client got in one write: its ReadyForQuery and what followed it. */
  coalesced(): Promise<Buffer>;
  close(): Promise<void>;
}

const READY_FOR_QUERY = 0x5a; // 'Z'
const BACKEND_KEY_DATA = 0x4b; // 'K'

export async function startCoalescingProxy(target: { host: string; port: number }, endBackend: (pid: number) => Promise<unknown>): Promise<CoalescingProxy> {
  const sockets = new Set<Socket>();
  let first = true;
  let resolveCoalesced: (bytes: Buffer) => void = () => undefined;
  const coalesced = new Promise<Buffer>((resolve) => (resolveCoalesced = resolve));
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.once('close', () => sockets.delete(socket));
    return socket;
  };
  const server = createServer((client) => {
    track(client);
    const upstream = track(connect(target.port, target.host));
    client.pipe(upstream);
    if (!first) {
      upstream.pipe(client);
      return;
    }
    first = false;
    holdFromReadyForQuery(upstream, client, endBackend, resolveCoalesced);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    coalesced: () => coalesced,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Forwards the server's messages until its first ReadyForQuery; from there holds everything until the backend is gone, then sends it in one write. */
function holdFromReadyForQuery(upstream: Socket, client: Socket, endBackend: (pid: number) => Promise<unknown>, done: (bytes: Buffer) => void): void {
  let pending = Buffer.alloc(0);
  let pid: number | undefined;
  let held: Buffer | undefined;
  upstream.on('data', (chunk: Buffer) => {
    if (held) {
      held = Buffer.concat([held, chunk]);
      return;
    }
    pending = Buffer.concat([pending, chunk]);
    let offset = 0;
    while (pending.length - offset >= 5) {
      const type = pending[offset] as number;
      const end = offset + 1 + pending.readInt32BE(offset + 1);
      if (pending.length < end) break;
      if (type === BACKEND_KEY_DATA) pid = pending.readInt32BE(offset + 5);
      if (type === READY_FOR_QUERY && pid !== undefined) {
        held = pending.subarray(offset);
        void endBackend(pid);
        break;
      }
      offset = end;
    }
    client.write(pending.subarray(0, offset));
    pending = pending.subarray(offset);
  });
  upstream.once('close', () => {
    const bytes = held ?? Buffer.alloc(0);
    client.end(bytes);
    done(bytes);
  });
}
