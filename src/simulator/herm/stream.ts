import type { ServerResponse } from 'node:http';
import type { TimerRegistry } from '../shared/timers.js';

const PING = ': ping\n\n';

/**
 * The live subscribers of every session's event stream. Events are written straight to each
 * subscriber (nothing is replayed: a stream sees what happens after it opened).
 */
export class SessionStreams {
  private readonly subscribers = new Map<string, Set<ServerResponse>>();

  constructor(
    private readonly timers: TimerRegistry,
    private readonly keepaliveMs: number,
  ) {}

  open(sessionId: string, res: ServerResponse): void {
    if (res.destroyed) return;
    res.setHeader('Content-Type', 'text/event-stream');
    res.setHeader('Cache-Control', 'no-cache');
    res.setHeader('X-Accel-Buffering', 'no');
    res.writeHead(200);
    res.flushHeaders();
    let set = this.subscribers.get(sessionId);
    if (!set) {
      set = new Set();
      this.subscribers.set(sessionId, set);
    }
    set.add(res);
    const gone = new AbortController();
    res.once('close', () => {
      gone.abort();
      this.remove(sessionId, res);
    });
    void this.keepalive(res, gone.signal);
  }

  /** Sends `event: <type>\ndata: <json>\n\n` to every subscriber of the session. */
  publish(sessionId: string, data: { type: string }): void {
    const frame = `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`;
    for (const res of this.subscribers.get(sessionId) ?? []) {
      if (!res.destroyed && !res.writableEnded) res.write(frame);
    }
  }

  /** Number of open subscribers of a session. */
  count(sessionId: string): number {
    return this.subscribers.get(sessionId)?.size ?? 0;
  }

  /** Ends every stream. */
  endAll(): void {
    for (const set of this.subscribers.values()) for (const res of set) if (!res.writableEnded) res.end();
    this.subscribers.clear();
  }

  private async keepalive(res: ServerResponse, gone: AbortSignal): Promise<void> {
    while (await this.timers.delay(this.keepaliveMs, gone)) {
      if (res.destroyed || res.writableEnded) return;
      res.write(PING);
    }
  }

  private remove(sessionId: string, res: ServerResponse): void {
    const set = this.subscribers.get(sessionId);
    set?.delete(res);
    if (set?.size === 0) this.subscribers.delete(sessionId);
  }
}
