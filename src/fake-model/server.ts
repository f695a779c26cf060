import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { collectBody, listen, originOf } from '../simulator/shared/http-common.js';
import { FAKE_MODEL_ID, plainCompletion, streamedCompletion } from './completion.js';
import { decideReply, type FakeReply } from './reply.js';

const HOST = '127.0.0.1';
const MAX_REQUEST_BYTES = 32 * 1024 * 1024;

export interface FakeModelOptions {
  /** Default 0: a free port. */
  port?: number;
}

/** One request the fake received, for tests and diagnostics (no bodies are kept). */
export interface FakeModelRequest {
  method: string;
  path: string;
  /** For chat completions: what was answered and how. */
  reply?: FakeReply['kind'];
  stream?: boolean;
}

export interface FakeModel {
  /** The OpenAI-compatible base URL, ending in `/v1`. */
  readonly baseUrl: string;
  readonly requests: readonly FakeModelRequest[];
  close(): Promise<void>;
}

/** Starts the fake OpenAI-compatible model on 127.0.0.1. */
export async function startFakeModel(options: FakeModelOptions = {}): Promise<FakeModel> {
  const requests: FakeModelRequest[] = [];
  const server = createServer((req, res) => {
    const record: FakeModelRequest = { method: req.method ?? '', path: (req.url ?? '').split('?')[0] ?? '' };
    requests.push(record);
    route(req, res, record).catch(() => {
      if (!res.headersSent) sendJson(res, 500, openAiError('fake model failure', 'server_error'));
      else res.destroy();
    });
  });
  const port = await listen(server, HOST, options.port ?? 0);
  return {
    baseUrl: `${originOf(HOST, port)}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function route(req: IncomingMessage, res: ServerResponse, record: FakeModelRequest): Promise<void> {
  if (req.method === 'GET' && record.path === '/v1/models') {
    sendJson(res, 200, { object: 'list', data: [{ id: FAKE_MODEL_ID, object: 'model', created: 0, owned_by: 'aip-fake-model' }] });
    return;
  }
  if (req.method === 'POST' && record.path === '/v1/chat/completions') {
    await chatCompletion(req, res, record);
    return;
  }
  // Other probes (/api/tags, /v1/props, /version, …) get an immediate 404.
  sendJson(res, 404, openAiError(`no route ${req.method ?? ''} ${record.path}`, 'invalid_request_error'));
}

async function chatCompletion(req: IncomingMessage, res: ServerResponse, record: FakeModelRequest): Promise<void> {
  const body = await collectBody(req, MAX_REQUEST_BYTES);
  if (!body.complete) return;
  const request = parseObject(body.bytes);
  if (!request) {
    sendJson(res, 400, openAiError('the body must be a JSON object', 'invalid_request_error'));
    return;
  }
  const reply = decideReply(request);
  record.reply = reply.kind;
  record.stream = request['stream'] === true;
  if (!record.stream) {
    sendJson(res, 200, plainCompletion(reply, body.bytes.length));
    return;
  }
  const options = request['stream_options'] as { include_usage?: unknown } | undefined;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const chunk of streamedCompletion(reply, body.bytes.length, options?.include_usage === true)) res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  res.end('data: [DONE]\n\n');
}

function parseObject(bytes: Buffer): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(bytes.toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function openAiError(message: string, type: string) {
  return { error: { message, type, param: null, code: null } };
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
