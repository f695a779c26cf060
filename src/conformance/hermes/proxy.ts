import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Clock } from '../kit/types.js';
import { TERMINAL_EVENTS } from '../../contract/hermes-vocabulary.js';

/** What the proxy retains of one request: never a credential, only whether the expected one was presented. */
export interface ProxiedRequest {
  id: string;
  method: string;
  path: string;
  /** `X-AIP-*` and `Idempotency-Key` headers as sent (they carry no secret). */
  headers: Record<string, string>;
  credential: 'expected' | 'other' | 'absent';
  received_at: number;
  /** The status the connector received. */
  status: number | null;
  /** False when the proxy answered itself (an injected fault) instead of asking the provider. */
  forwarded: boolean;
}

/** A fault the proxy plays once per matching request, `times` times. */
export interface ProxyFault {
  method: string;
  /** Matches the request path (without query). */
  path: RegExp;
  times?: number;
  /** Answer this instead of asking the provider. */
  respond?: { status: number; body: string; headers?: Record<string, string> };
  /** Ask the provider, then replace its body with this one (same status). */
  replaceBody?: string;
}

export interface RecordingProxy {
  readonly url: string;
  readonly requests: readonly ProxiedRequest[];
  arm(fault: ProxyFault): void;
  /** Holds the next event stream at its terminal event, until released: see StreamHold. */
  holdEventStream(): StreamHold;
  close(): Promise<void>;
}

/**
 * The next `GET …/events` event stream, passed on as it comes up to the run's terminal event,
 * which (with everything after it) is held until `release()`: a connector that streams hands the
 * earlier events to its consumer meanwhile; one that reads the whole stream first cannot.
 */
export interface StreamHold {
  /** Whether the terminal event has gone to the connector. */
  readonly terminalSent: boolean;
  /** Resolves once the terminal event reached the proxy and is held (never, if the stream has none). */
  readonly terminalHeld: Promise<void>;
  /** Resolves once the provider's whole stream has been handed to the connector's socket, or the connection closed. */
  readonly delivered: Promise<void>;
  /** Sends what was held and passes the rest of the stream through. */
  release(): void;
}

/** The end of one SSE frame (a blank line), in any of the line endings SSE allows. */
const FRAME_END = /\r\n\r\n|\n\n|\r\r/;
const LINE_BREAK = /\r\n|\r|\n/;
const EVENT_STREAM_PATH = /\/events$/;

const RETAINED_HEADER = /^(x-aip-|idempotency-key$)/;

/**
 * A loopback HTTP proxy in front of the provider: it records every request the connector sends
 * and can play provider faults. It is how the kit observes a live endpoint it cannot script.
 */
export async function startRecordingProxy(target: string, apiKey: string, clock: Clock): Promise<RecordingProxy> {
  const requests: ProxiedRequest[] = [];
  const faults: Array<ProxyFault & { left: number }> = [];
  const upstream = new URL(target);
  const send = upstream.protocol === 'https:' ? httpsRequest : httpRequest;
  const open = new Set<IncomingMessage | ServerResponse>();
  const holds: HeldStream[] = [];

  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const record: ProxiedRequest = {
      id: `preq_${String(requests.length + 1).padStart(4, '0')}`,
      method: req.method ?? 'GET',
      path,
      headers: retainedHeaders(req),
      credential: credentialOf(req.headers.authorization, apiKey),
      received_at: clock.now(),
      status: null,
      forwarded: true,
    };
    requests.push(record);
    const fault = takeFault(faults, record.method, path);
    if (fault?.respond) {
      record.forwarded = false;
      req.resume();
      req.on('end', () => answer(res, record, fault.respond as NonNullable<ProxyFault['respond']>));
      return;
    }
    const outgoing = send(new URL(req.url ?? '/', upstream), { method: req.method, headers: { ...req.headers, host: upstream.host } }, (providerRes) => {
      open.add(providerRes);
      record.status = providerRes.statusCode ?? 502;
      if (fault?.replaceBody !== undefined) {
        providerRes.resume();
        providerRes.on('end', () =>
          answer(res, record, { status: record.status ?? 502, body: fault.replaceBody as string, headers: { 'content-type': 'application/json' } }),
        );
        return;
      }
      res.writeHead(record.status, providerRes.headers);
      const hold = req.method === 'GET' && EVENT_STREAM_PATH.test(path) ? nextHold(holds) : undefined;
      if (hold) hold.forward(providerRes, res);
      else providerRes.pipe(res);
    });
    outgoing.on('error', () => res.destroy());
    // The connector leaving (a cut stream, an abort) reaches the provider as it would without the proxy.
    res.on('close', () => {
      if (!res.writableFinished) outgoing.destroy();
    });
    req.pipe(outgoing);
  });
  server.on('connection', (socket) => socket.on('error', () => undefined));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    arm: (fault) => faults.push({ ...fault, left: fault.times ?? 1 }),
    holdEventStream: () => {
      const hold = new HeldStream();
      holds.push(hold);
      return hold;
    },
    close: async () => {
      for (const stream of open) stream.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** One event stream's hold: the frames before the terminal event go out as they come; from it on, bytes wait for release(). */
class HeldStream implements StreamHold {
  #released = false;
  #reachedTerminal = false;
  #terminalSent = false;
  /** An incomplete frame, kept until its end shows whether it is the terminal event. */
  #partial: Buffer = Buffer.alloc(0);
  readonly #held: Buffer[] = [];
  #res: ServerResponse | undefined;
  #providerEnded = false;
  #terminalReached = () => {};
  #deliveredAll = () => {};
  readonly terminalHeld = new Promise<void>((resolve) => (this.#terminalReached = resolve));
  readonly delivered = new Promise<void>((resolve) => (this.#deliveredAll = resolve));

  get terminalSent(): boolean {
    return this.#terminalSent;
  }

  /** Still waiting for its stream: not released before the stream came. */
  get waiting(): boolean {
    return !this.#released;
  }

  forward(providerRes: IncomingMessage, res: ServerResponse): void {
    this.#res = res;
    res.once('close', this.#deliveredAll);
    res.once('finish', this.#deliveredAll);
    providerRes.on('data', (chunk: Buffer) => this.#take(chunk));
    providerRes.once('end', () => {
      this.#providerEnded = true;
      if (this.#released || !this.#reachedTerminal) this.#flushAndEnd();
    });
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#terminalSent ||= this.#reachedTerminal;
    this.#res?.write(Buffer.concat([this.#partial, ...this.#held]));
    this.#partial = Buffer.alloc(0);
    this.#held.length = 0;
    if (this.#providerEnded) this.#res?.end();
  }

  #take(chunk: Buffer): void {
    if (this.#released) this.#res?.write(chunk);
    else if (this.#reachedTerminal) this.#held.push(chunk);
    else this.#sendBeforeTerminal(Buffer.concat([this.#partial, chunk]));
  }

  /** Writes the whole frames before the terminal event; holds the terminal frame and what follows, or keeps an incomplete frame. */
  #sendBeforeTerminal(bytes: Buffer): void {
    const text = bytes.toString('latin1');
    let sent = 0;
    for (;;) {
      const match = FRAME_END.exec(text.slice(sent));
      if (!match) break;
      const end = sent + match.index + match[0].length;
      if (isTerminalFrame(text.slice(sent, end))) {
        this.#reachedTerminal = true;
        this.#held.push(bytes.subarray(sent));
        this.#terminalReached();
        break;
      }
      sent = end;
    }
    this.#res?.write(bytes.subarray(0, sent));
    this.#partial = this.#reachedTerminal ? Buffer.alloc(0) : bytes.subarray(sent);
  }

  /** The provider ended with nothing held: what is left goes out, and the stream ends. */
  #flushAndEnd(): void {
    this.#res?.write(this.#partial);
    this.#partial = Buffer.alloc(0);
    this.#res?.end();
  }
}

/** Whether an SSE frame is a Hermes terminal event: named by an `event:` line, else by its JSON data's `event` (or `type`). */
function isTerminalFrame(frame: string): boolean {
  const lines = frame.split(LINE_BREAK);
  const named = lines.find((line) => line.startsWith('event:'));
  if (named !== undefined) return TERMINAL_EVENTS.has(fieldValue(named));
  const data = lines.filter((line) => line.startsWith('data:')).map(fieldValue);
  try {
    const record = JSON.parse(data.join('\n')) as { event?: unknown; type?: unknown } | null;
    const name = record?.event ?? record?.type;
    return typeof name === 'string' && TERMINAL_EVENTS.has(name);
  } catch {
    return false;
  }
}

/** An SSE line's value: after the colon, less one leading space. */
function fieldValue(line: string): string {
  const value = line.slice(line.indexOf(':') + 1);
  return value.startsWith(' ') ? value.slice(1) : value;
}

/** The oldest hold still waiting for its stream; one released before its stream came (the call ended first) is dropped. */
function nextHold(holds: HeldStream[]): HeldStream | undefined {
  let hold = holds.shift();
  while (hold && !hold.waiting) hold = holds.shift();
  return hold;
}

function takeFault(faults: Array<ProxyFault & { left: number }>, method: string, path: string): ProxyFault | undefined {
  const fault = faults.find((candidate) => candidate.left > 0 && candidate.method === method && candidate.path.test(path));
  if (fault) fault.left -= 1;
  return fault;
}

function answer(res: ServerResponse, record: ProxiedRequest, response: NonNullable<ProxyFault['respond']>): void {
  record.status = response.status;
  res.writeHead(response.status, { 'content-type': 'application/json', ...response.headers });
  res.end(response.body);
}

function retainedHeaders(req: IncomingMessage): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (RETAINED_HEADER.test(name) && typeof value === 'string') kept[name] = value;
  }
  return kept;
}

function credentialOf(authorization: string | undefined, apiKey: string): ProxiedRequest['credential'] {
  if (authorization === undefined) return 'absent';
  return authorization === `Bearer ${apiKey}` ? 'expected' : 'other';
}
