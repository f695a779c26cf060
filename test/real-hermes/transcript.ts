/**
 * A wire-level client for comparing two Hermes servers (the simulator and a real release): every
 * exchange becomes a transcript entry with ids, timestamps, token counts and model texts replaced by
 * placeholders (except the streamed text, the joined `message.delta`s, which both servers get from
 * the same script), so that two servers running the same logical run give equal transcripts exactly
 * when their status codes, body shapes (keys and key order), error codes and messages, event name
 * sequences, streamed text, SSE framing and headers agree.
 */
import { connect } from 'node:net';
import { Readable } from 'node:stream';
import { request } from 'undici';
import { HERMES_SECURITY_HEADERS } from '../helpers/hermes-headers.js';

export interface Server {
  readonly baseUrl: string;
  readonly apiKey: string;
}

export type Entry = Record<string, unknown>;

const RUN_ID = /run_[0-9a-f]{32}/g;
/** An approval's `request_id` (0.20.1 on): uuid4().hex, different on every run. */
const REQUEST_ID = /^[0-9a-f]{32}$/;
const TIME_KEYS = new Set(['timestamp', 'created_at', 'updated_at', 'shutdown_requested_at']);
/** What 0.22's `runtime` names (the configured provider and model), which the two servers cannot share. */
const RUNTIME_TEXT_KEYS = new Set(['provider', 'model']);
/** Texts a model or Hermes' own wording decides, which the two servers cannot share. */
const TEXT_KEYS = new Set(['delta', 'text', 'output', 'command', 'preview', 'description', 'pattern_key', 'pattern_keys']);
const COMPARED_HEADERS = ['content-type', 'cache-control', 'x-accel-buffering', 'retry-after', 'content-length'];
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const MAX_BODY_BYTES = 10_000_000;

export class TranscriptClient {
  readonly entries: Entry[] = [];
  private readonly runNames = new Map<string, string>();
  /** Runs whose stream nobody has read yet: `drain()` reads them so no slot of the 429 gate stays taken. */
  private readonly unread = new Set<string>();

  constructor(private readonly server: Server) {}

  /** Records a note (e.g. the statuses seen while polling). */
  note(entry: Entry): void {
    this.entries.push(this.normalise(entry) as Entry);
  }

  async start(body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<string | undefined> {
    const answer = await this.exchange('POST', '/v1/runs', { body: JSON.stringify(body), headers });
    const runId = (answer.json as { run_id?: string } | undefined)?.run_id;
    if (answer.status === 202 && runId) this.unread.add(runId);
    return answer.status === 202 ? runId : undefined;
  }

  status(runId: string) {
    return this.exchange('GET', `/v1/runs/${runId}`);
  }

  approve(runId: string, choice: string) {
    return this.exchange('POST', `/v1/runs/${runId}/approval`, { body: JSON.stringify({ choice }) });
  }

  stop(runId: string) {
    return this.exchange('POST', `/v1/runs/${runId}/stop`, { body: '{}' });
  }

  /** `POST …/steer` (from 0.20.1). */
  steer(runId: string, body: Record<string, unknown>) {
    return this.exchange('POST', `/v1/runs/${runId}/steer`, { body: JSON.stringify(body) });
  }

  /**
   * `GET /v1/capabilities`, recorded trimmed to the runs API as the simulator serves it: the features and
   * endpoints named `run…` (so a run feature a release adds is compared too), the two event features and health.
   */
  async capabilities(): Promise<void> {
    const answer = await request(`${this.server.baseUrl}/v1/capabilities`, { headers: { authorization: `Bearer ${this.server.apiKey}` }, reset: true });
    const json = parseJson(await answer.body.text()) as Record<string, unknown> | undefined;
    const runsOnly = (section: unknown, others: string[]) =>
      isObject(section) ? Object.fromEntries(Object.entries(section).filter(([name]) => name.startsWith('run') || others.includes(name))) : section;
    this.note({
      request: 'GET /v1/capabilities (runs API only)',
      status: answer.statusCode,
      headers: headerSummary(answer.headers, false),
      body: json && {
        object: json.object,
        auth: json.auth,
        features: runsOnly(json.features, ['tool_progress_events', 'approval_events']),
        endpoints: runsOnly(json.endpoints, ['health']),
      },
    });
  }

  /** One JSON exchange, recorded. */
  async exchange(
    method: string,
    path: string,
    options: { body?: string | Readable; key?: string; headers?: Record<string, string> } = {},
  ): Promise<{ status: number; json: unknown }> {
    const answer = await request(`${this.server.baseUrl}${path}`, {
      method: method as 'GET' | 'POST',
      headers: {
        authorization: `Bearer ${options.key ?? this.server.apiKey}`,
        ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
        ...options.headers,
      },
      ...(options.body === undefined ? {} : { body: options.body }),
      reset: true,
    });
    const text = await answer.body.text();
    const json = parseJson(text);
    const sent = Object.keys(options.headers ?? {});
    this.note({
      request: `${method} ${path}${sent.length > 0 ? ` (${sent.join(', ')})` : ''}`,
      status: answer.statusCode,
      headers: headerSummary(answer.headers, false),
      body: json ?? text,
    });
    return { status: answer.statusCode, json };
  }

  /** A POST whose declared Content-Length is over Hermes' limit; no body is sent. */
  async declaredTooLarge(): Promise<void> {
    const { status, headers, body } = await rawHeadOnlyPost(this.server, MAX_BODY_BYTES + 1);
    this.note({ request: 'POST /v1/runs (Content-Length over the limit)', status, headers: headerSummary(headers, false), body: parseJson(body) ?? body });
  }

  /** A chunked POST that goes over Hermes' limit. */
  async chunkedTooLarge(): Promise<void> {
    const body = Readable.from([Buffer.from('{"input": "'), Buffer.alloc(MAX_BODY_BYTES + 1, 0x78), Buffer.from('"}')]);
    await this.exchange('POST', '/v1/runs', { body });
  }

  /** Polls the status (unrecorded) until `wanted`; bounded only to fail a hung test. */
  async waitForStatus(runId: string, wanted: string): Promise<void> {
    for (let attempt = 0; attempt < 300; attempt++) {
      if ((await this.readStatus(runId)) === wanted) return;
      await sleep(100);
    }
    throw new Error(`${this.server.baseUrl}: run ${runId} never reached ${wanted}`);
  }

  /** Polls the status every 50 ms until it is terminal and records the distinct statuses seen, in order. */
  async recordStatusesUntilTerminal(runId: string): Promise<void> {
    const seen: string[] = [];
    for (let attempt = 0; attempt < 600; attempt++) {
      const status = await this.readStatus(runId);
      if (status !== undefined && seen.at(-1) !== status) seen.push(status);
      if (status !== undefined && TERMINAL.has(status)) break;
      await sleep(50);
    }
    this.note({ statuses_seen: seen });
  }

  /** Opens the run's event stream (`query` such as `?last_seq=3`, extra `headers` such as `Last-Event-ID`); `recordEvents` records it once it has ended. */
  openEvents(runId: string, options: EventStreamOptions = {}): EventStream {
    this.unread.delete(runId);
    return new EventStream(this.server, runId, options);
  }

  /** Waits for the stream's end and records it here, so that the order of entries follows the scenario, not timing. */
  async recordEvents(stream: EventStream): Promise<void> {
    this.note(await stream.ended);
  }

  events(runId: string, options: EventStreamOptions = {}): Promise<void> {
    return this.recordEvents(this.openEvents(runId, options));
  }

  /** Reads (unrecorded) every stream not read yet, so that the next scenario finds the 429 gate empty. */
  async drain(): Promise<void> {
    for (const runId of [...this.unread]) {
      this.unread.delete(runId);
      await new EventStream(this.server, runId).ended;
    }
  }

  private async readStatus(runId: string): Promise<string | undefined> {
    const answer = await request(`${this.server.baseUrl}/v1/runs/${runId}`, { headers: { authorization: `Bearer ${this.server.apiKey}` }, reset: true });
    const json = parseJson(await answer.body.text()) as { status?: string } | undefined;
    return json?.status;
  }

  /** Run ids become <run1>, <run2>… in order of appearance; see the module comment for the rest. */
  private normalise(value: unknown, key?: string): unknown {
    if (typeof value === 'number' && key !== undefined && (TIME_KEYS.has(key) || key === 'duration')) return `<${key === 'duration' ? 'duration' : 'time'}>`;
    if (key !== undefined && TEXT_KEYS.has(key) && value !== null) return '<text>';
    if (key === 'version' && typeof value === 'string') return '<version>';
    if (key === 'request_id' && typeof value === 'string' && REQUEST_ID.test(value)) return '<request-id>';
    if (key === 'usage' && isObject(value)) return Object.fromEntries(Object.keys(value).map((name) => [name, '<tokens>']));
    if (key === 'runtime' && isObject(value))
      return Object.fromEntries(Object.entries(value).map(([name, item]) => [name, RUNTIME_TEXT_KEYS.has(name) ? '<text>' : item]));
    if (typeof value === 'string') return value.replace(RUN_ID, (id) => this.runName(id));
    if (Array.isArray(value)) return value.map((item) => this.normalise(item));
    if (isObject(value)) return Object.fromEntries(Object.entries(value).map(([name, item]) => [name, this.normalise(item, name)]));
    return value;
  }

  private runName(id: string): string {
    if (!this.runNames.has(id)) this.runNames.set(id, `<run${this.runNames.size + 1}>`);
    return this.runNames.get(id) as string;
  }
}

export interface EventStreamOptions {
  /** Appended to the path, e.g. `?last_seq=3`. */
  query?: string;
  headers?: Record<string, string>;
}

/** One subscriber of `GET /v1/runs/{id}/events`: collects the frames, lets a scenario wait for an event. */
export class EventStream {
  /** The stream's transcript entry, once it has ended. */
  readonly ended: Promise<Entry>;
  private text = '';
  private readonly waiters: Array<{ event: string; resolve: () => void }> = [];

  constructor(server: Server, runId: string, options: EventStreamOptions = {}) {
    this.ended = this.read(server, runId, options);
  }

  /** Resolves once a frame of this event has arrived (or the stream ended without one). */
  waitFor(event: string): Promise<void> {
    if (this.text.includes(`"event": "${event}"`)) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ event, resolve }));
  }

  private async read(server: Server, runId: string, options: EventStreamOptions): Promise<Entry> {
    try {
      const path = `/v1/runs/${runId}/events${options.query ?? ''}`;
      const headers = { authorization: `Bearer ${server.apiKey}`, ...options.headers };
      const answer = await request(`${server.baseUrl}${path}`, { headers, reset: true });
      for await (const chunk of answer.body) {
        this.text += (chunk as Buffer).toString('utf8');
        for (const waiter of this.waiters.filter((candidate) => this.text.includes(`"event": "${candidate.event}"`))) waiter.resolve();
      }
      const sse = String(answer.headers['content-type'] ?? '').startsWith('text/event-stream');
      const sent = Object.keys(options.headers ?? {});
      return {
        request: `GET ${path}${sent.length > 0 ? ` (${sent.join(', ')})` : ''}`,
        status: answer.statusCode,
        headers: headerSummary(answer.headers, sse),
        ...(sse ? { frames: frameSummary(this.text) } : { body: parseJson(this.text) ?? this.text }),
      };
    } finally {
      for (const waiter of this.waiters) waiter.resolve();
    }
  }
}

/**
 * Each SSE frame as `data <event>` (with its fields, and its `id:` line when it has one, as 0.22
 * sends) or the comment itself; consecutive `message.delta` frames collapse into one holding their
 * text joined (the two servers may split texts differently, but stream the same text) and the
 * first and last `seq` when they are numbered. A frame that is not exactly one `data: ` line with
 * Python's `json.dumps` separators, optionally after one `id: <n>` line, is recorded verbatim.
 */
function frameSummary(text: string): unknown[] {
  const frames: unknown[] = [];
  const parts = text.split('\n\n');
  const trailing = parts.pop();
  for (const frame of parts) {
    const summary = describeFrame(frame);
    const previous = frames.at(-1);
    if (isDeltas(summary) && isDeltas(previous)) {
      previous['message.delta+'] += summary['message.delta+'];
      if (summary.seqs !== undefined && previous.seqs !== undefined) previous.seqs = [previous.seqs[0], summary.seqs[1]];
    } else frames.push(summary);
  }
  if (trailing !== '') frames.push({ unterminated: trailing });
  return frames;
}

const isDeltas = (summary: unknown): summary is { 'message.delta+': string; seqs?: [unknown, unknown] } => isObject(summary) && 'message.delta+' in summary;

function describeFrame(frame: string): unknown {
  if (frame.startsWith(': ')) return frame;
  const idLine = /^id: (\d+)\n/.exec(frame);
  const rest = idLine ? frame.slice(idLine[0].length) : frame;
  const payload = rest.startsWith('data: ') ? rest.slice('data: '.length) : undefined;
  const event = payload === undefined || payload.includes('\n') || !hasPythonSeparators(payload) ? undefined : parseJson(payload);
  if (!isObject(event)) return { malformed: frame };
  const id = idLine ? { id: Number(idLine[1]) } : {};
  if (isAbandonedTool(event)) event['error'] = true;
  if (event['event'] === 'message.delta') {
    return { 'message.delta+': String(event['delta']), ...id, ...('seq' in event ? { seqs: [event['seq'], event['seq']] } : {}) };
  }
  return { ...id, data: event };
}

/**
 * 0.22 gives a stopped tool 3 s to exit; one that takes longer (a loaded machine) is abandoned and
 * reported `error: false` with this preview, instead of `error: true` with the interrupted command's
 * result. Which one comes is a race, so the abandoned outcome is recorded as the interrupted one
 * (docs/real-hermes-findings.md).
 */
export function isAbandonedTool(event: Record<string, unknown>): boolean {
  return event['event'] === 'tool.completed' && event['error'] === false && /^\[Tool execution cancelled — \S+ was abandoned: /.test(String(event['preview']));
}

/** `json.dumps` defaults: `", "` between items and `": "` after keys (no text here contains `",` or `":`). */
function hasPythonSeparators(payload: string): boolean {
  return !/":(?! )/.test(payload) && !/(["\d\]}el]),(?! )/.test(payload);
}

/** The compared headers, and whether all, none or some of the seven security headers were sent. */
function headerSummary(headers: Record<string, string | string[] | undefined>, stream: boolean): Entry {
  const present = HERMES_SECURITY_HEADERS.filter((name) => headers[name] !== undefined).length;
  const summary: Entry = { security: present === 0 ? 'none' : present === HERMES_SECURITY_HEADERS.length ? 'all' : 'some' };
  for (const name of COMPARED_HEADERS) {
    const value = headers[name];
    if (value === undefined) continue;
    // Lengths follow the (normalised) texts; only whether one is declared is compared.
    summary[name] = name === 'content-length' ? 'declared' : value;
  }
  if (stream && headers['transfer-encoding'] !== undefined) summary['transfer-encoding'] = headers['transfer-encoding'];
  return summary;
}

function rawHeadOnlyPost(server: Server, length: number): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  const url = new URL(server.baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    let received = '';
    socket.on('data', (chunk) => (received += chunk.toString('utf8')));
    socket.on('error', reject);
    socket.on('end', () => {
      const [head = '', body = ''] = received.split('\r\n\r\n');
      const [statusLine = '', ...lines] = head.split('\r\n');
      const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body });
    });
    socket.write(
      `POST /v1/runs HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${server.apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nConnection: close\r\n\r\n`,
    );
  });
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
