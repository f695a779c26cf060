import { SseDecoder, isSseDone } from '../sse.js';
import type { HermClient } from './herm-client.js';

export interface SessionStreamOptions {
  client: HermClient;
  origin: string;
  path: string;
  signal: AbortSignal;
  onEvent: (event: Record<string, unknown>) => Promise<void>;
}

const MiB = 1024 * 1024;

/** Reads a Herm session's SSE stream and hands each event on, in order, until the signal aborts or the stream ends. */
export async function subscribeToSession({ client, origin, path, signal, onEvent }: SessionStreamOptions): Promise<void> {
  if (signal.aborted) return;
  const response = await client.dispatcher.request({ origin, path, method: 'GET', headers: client.headers('text/event-stream'), signal }).catch((error: unknown) => {
    if (signal.aborted) return undefined;
    throw error;
  });
  if (!response) return;
  response.body.on('error', () => undefined);
  if (response.statusCode !== 200) {
    await response.body.dump().catch(() => undefined);
    throw new Error(`the Herm session stream answered HTTP ${response.statusCode}`);
  }
  const decoder = new SseDecoder({ maxFrameBytes: MiB, maxStreamBytes: Number.MAX_SAFE_INTEGER }, 'herm');
  try {
    for await (const chunk of response.body as AsyncIterable<Buffer>) {
      for (const item of decoder.push(chunk)) if (!isSseDone(item)) await onEvent(item.data);
    }
  } catch (error) {
    if (!signal.aborted) throw error;
  }
}
