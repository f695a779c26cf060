import { SseDecoder, isSseDone } from '../transport/sse.js';
import type { HermClient } from './herm-client.js';

export interface SessionStreamOptions {
  client: HermClient;
  path: string;
  signal: AbortSignal;
  onEvent: (event: Record<string, unknown>) => Promise<void>;
}

/** Why a session stream ended early. Its message names an HTTP status or an error code, never a header or a body. */
export class HermStreamError extends Error {
  constructor(message: string, options?: { cause: unknown }) {
    super(message, options);
    this.name = 'HermStreamError';
  }
}

const MiB = 1024 * 1024;

/**
 * Reads a Herm session's SSE stream and hands each event on, in order, until the signal aborts or
 * the stream ends. Rejects with a HermStreamError when it cannot open or read the stream, or an
 * event cannot be handled.
 */
export async function subscribeToSession({ client, path, signal, onEvent }: SessionStreamOptions): Promise<void> {
  if (signal.aborted) return;
  let opened: Awaited<ReturnType<HermClient['openStream']>> | undefined;
  try {
    opened = await client.openStream(path, signal);
    const { response } = opened;
    if (response.statusCode !== 200) {
      await response.body.dump().catch(() => undefined);
      throw new HermStreamError(`the Herm session stream answered HTTP ${response.statusCode}`);
    }
    const decoder = new SseDecoder({ maxFrameBytes: MiB, maxStreamBytes: Number.MAX_SAFE_INTEGER }, 'herm');
    for await (const chunk of response.body as AsyncIterable<Buffer>) {
      for (const item of decoder.push(chunk)) if (!isSseDone(item)) await onEvent(item.data);
      // A fault after the events of this read (a bad frame) ends the stream once they are handled.
      if (decoder.failure) throw decoder.failure;
    }
  } catch (error) {
    if (signal.aborted) return;
    if (error instanceof HermStreamError) throw error;
    throw new HermStreamError(`the Herm session stream failed (${codeOf(error)})`, { cause: error });
  } finally {
    opened?.scope.dispose();
  }
}

function codeOf(error: unknown): string {
  const failure = error as { code?: unknown; details?: { transport_code?: unknown } } | null;
  const code = failure?.details?.transport_code ?? failure?.code;
  if (typeof code === 'string') return code;
  return error instanceof Error ? error.name : typeof error;
}
