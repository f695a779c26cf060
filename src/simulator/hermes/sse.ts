import type { ServerResponse } from 'node:http';
import type { RunStream } from './run-stream.js';
import type { TimerRegistry } from '../shared/timers.js';
import { dropSecurityHeaders } from './wire.js';

export interface SseOptions {
  keepaliveMs: number;
  timers: TimerRegistry;
  /** Frames written right after the head, before anything of the queue (0.22: `: open`, then any `replay.truncated`). */
  opening?: string[];
  /** Called once this subscriber is done, however it ended. */
  onDone?: () => void;
}

const KEEPALIVE = ': keepalive\n\n';
const STREAM_CLOSED = ': stream closed\n\n';

/**
 * One SSE subscriber: takes items from the run's shared queue until the sentinel,
 * a `cut`, or the client going away. Resolves when this subscriber is done; the
 * caller then removes the stream, as Hermes' `finally` does.
 */
export async function streamRunEvents(res: ServerResponse, stream: RunStream, options: SseOptions): Promise<void> {
  if (res.destroyed) return;
  const gone = new AbortController();
  const onClose = (): void => gone.abort();
  res.once('close', onClose);
  stream.attach();
  try {
    openEventStream(res);
    for (const frame of options.opening ?? []) if (!(await writeChunk(res, frame))) return;
    await pump(res, stream, options, gone.signal);
  } finally {
    stream.detach();
    res.off('close', onClose);
    options.onDone?.();
  }
}

function openEventStream(res: ServerResponse): void {
  dropSecurityHeaders(res);
  res.setHeader('Content-Type', 'text/event-stream');
  res.setHeader('Cache-Control', 'no-cache');
  res.setHeader('X-Accel-Buffering', 'no');
  res.writeHead(200);
  res.flushHeaders();
}

async function pump(res: ServerResponse, stream: RunStream, options: SseOptions, gone: AbortSignal): Promise<void> {
  for (;;) {
    const item = await stream.take(options.keepaliveMs, gone);
    switch (item.kind) {
      case 'aborted':
        return;
      case 'timeout':
        if (!(await writeChunk(res, KEEPALIVE))) return;
        break;
      case 'bytes':
        if (!(await writeChunk(res, item.data))) return;
        break;
      case 'cut':
        // Every earlier frame has been flushed (writeChunk waits), so nothing queued is lost.
        res.socket?.destroy();
        return;
      case 'end':
        await writeChunk(res, STREAM_CLOSED);
        res.end();
        return;
    }
  }
}

/** Resolves once the chunk has been handed to the socket; false if the connection is gone. */
function writeChunk(res: ServerResponse, data: string | Uint8Array): Promise<boolean> {
  if (res.destroyed || res.writableEnded) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onClose = (): void => resolve(false);
    res.once('close', onClose);
    res.write(data, (error) => {
      res.off('close', onClose);
      resolve(!error);
    });
  });
}
