import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Plumbing both simulators (Hermes and Herm) share. */

export interface CollectedBody {
  /** False when the client went away before the body ended. */
  complete: boolean;
  /** True when more than `maxBytes` arrived; the bytes were discarded. */
  overflow: boolean;
  bytes: Buffer;
}

/**
 * Starts draining the request body at once, buffering at most `maxBytes`. Handlers that
 * answer without the body (401, 413, a 429 gate) simply never await it.
 */
export function collectBody(req: IncomingMessage, maxBytes: number): Promise<CollectedBody> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (complete: boolean): void => {
      const overflow = size > maxBytes;
      resolve({ complete, overflow, bytes: overflow ? Buffer.alloc(0) : Buffer.concat(chunks) });
    };
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBytes) chunks.push(chunk);
      else chunks.length = 0;
    });
    req.once('end', () => finish(true));
    req.once('error', () => finish(false));
    req.once('close', () => finish(req.complete));
  });
}

/** Listens and resolves with the bound port (port 0 picks a free one). */
export async function listen(server: Server, host: string, port: number): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
}

export function originOf(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}
