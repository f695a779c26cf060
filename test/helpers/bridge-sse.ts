/**
 * A Herm session stream reader that shares nothing with the bridge: plain node:http and a
 * hand-written frame parser, so a test sees what any UI client would see.
 */
import { request, type ClientRequest } from 'node:http';

export interface SessionFrame {
  event: string | undefined;
  data: Record<string, unknown>;
}

export interface SessionTap {
  /** Every frame received so far, in order. */
  readonly frames: SessionFrame[];
  close(): void;
}

/** Opens `GET {baseUrl}/v1/sessions/{id}/stream` and resolves once Herm answered 200. */
export function tapSession(baseUrl: string, apiKey: string, sessionId: string): Promise<SessionTap> {
  const frames: SessionFrame[] = [];
  let req: ClientRequest;
  return new Promise((resolve, reject) => {
    req = request(
      `${baseUrl}/v1/sessions/${encodeURIComponent(sessionId)}/stream`,
      { headers: { 'x-api-key': apiKey, accept: 'text/event-stream' } },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          reject(new Error(`session stream answered HTTP ${res.statusCode}`));
          return;
        }
        let buffer = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          buffer += chunk.replace(/\r\n?/g, '\n');
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            let event: string | undefined;
            const data: string[] = [];
            for (const line of block.split('\n')) {
              if (line.startsWith('event:')) event = line.slice(6).trim();
              else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
            }
            if (data.length > 0) frames.push({ event, data: JSON.parse(data.join('\n')) as Record<string, unknown> });
          }
        });
        res.on('error', () => undefined);
        resolve({ frames, close: () => req.destroy() });
      },
    );
    req.on('error', reject);
    req.end();
  });
}
