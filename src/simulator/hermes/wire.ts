import type { CollectedBody } from '../shared/http-common.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { pyJson } from './py-json.js';

export const MAX_BODY_BYTES = 10_000_000;

const SECURITY_HEADERS: ReadonlyArray<readonly [string, string]> = [
  ['Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'"],
  ['Permissions-Policy', 'camera=(), microphone=(), geolocation=()'],
  ['Strict-Transport-Security', 'max-age=31536000; includeSubDomains'],
  ['X-Content-Type-Options', 'nosniff'],
  ['X-Frame-Options', 'DENY'],
  ['X-XSS-Protection', '0'],
  ['Referrer-Policy', 'no-referrer'],
];

export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';
const TEXT_CONTENT_TYPE = 'text/plain; charset=utf-8';

export type HeaderList = Array<readonly [string, string]>;

/** Node keeps the case and order given to setHeader, which keeps answers close to the captures. */
export function applyHeaders(res: ServerResponse, headers: ReadonlyArray<readonly [string, string]>): void {
  for (const [name, value] of headers) res.setHeader(name, value);
}

export function applySecurityHeaders(res: ServerResponse): void {
  applyHeaders(res, SECURITY_HEADERS);
}

/** Hermes' security-header middleware adds them to what a handler returns: an SSE response was already sent by then. */
export function dropSecurityHeaders(res: ServerResponse): void {
  for (const [name] of SECURITY_HEADERS) res.removeHeader(name);
}

export function sendBody(res: ServerResponse, status: number, body: string, headers: HeaderList = []): void {
  if (res.headersSent || res.destroyed) return;
  applyHeaders(res, headers);
  const bytes = Buffer.from(body, 'utf8');
  res.setHeader('Content-Length', String(bytes.length));
  res.writeHead(status);
  res.end(bytes);
}

export function sendJson(res: ServerResponse, status: number, value: unknown, headers: HeaderList = []): void {
  sendBody(res, status, pyJson(value), [['Content-Type', JSON_CONTENT_TYPE], ...headers]);
}

/** aiohttp's plain-text answers (`404: Not Found`, `405: Method Not Allowed`). */
export function sendHttpText(res: ServerResponse, status: number, text: string, headers: HeaderList = []): void {
  sendBody(res, status, text, [['Content-Type', TEXT_CONTENT_TYPE], ...headers]);
}

/** What aiohttp answers when a handler raises (e.g. `body.get` on a JSON array). */
export function sendUnhandledError(res: ServerResponse): void {
  res.setHeader('Connection', 'close');
  sendHttpText(res, 500, '500 Internal Server Error\n\nServer got itself in trouble');
}

/** `_openai_error(message, err_type, param=None, code)`. */
export function openAiError(message: string, code: string | null = null, type = 'invalid_request_error'): unknown {
  return { error: { message, type, param: null, code } };
}

export const BODY_TOO_LARGE = openAiError('Request body too large.', 'body_too_large');

export function runNotFound(runId: string): unknown {
  return openAiError(`Run not found: ${runId}`, 'run_not_found');
}

/** The 401 body has no `param` key. */
export const INVALID_API_KEY = { error: { message: 'Invalid API key', type: 'invalid_request_error', code: 'invalid_api_key' } };
/** The 401 body from Hermes 0.20.1 on. */
export const GATEWAY_AUTH_FAILED = { error: { message: 'Invalid gateway API key (API_SERVER_KEY)', type: 'gateway_auth_error', code: 'gateway_auth_failed' } };

export type ParsedJson = { kind: 'object'; value: Record<string, unknown> } | { kind: 'non-object'; value: unknown } | { kind: 'invalid' };

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Like aiohttp's `await request.json()`: UTF-8 text then `json.loads`. */
export function parseJsonBody(body: CollectedBody): ParsedJson {
  // A chunked body over the limit: aiohttp raises inside `request.json()`, and the handler's
  // `except Exception` answers 400 Invalid JSON before the body-limit middleware could answer 413
  // (measured on 0.18.2 and 0.19.0).
  if (body.overflow) return { kind: 'invalid' };
  let value: unknown;
  try {
    value = JSON.parse(strictUtf8.decode(body.bytes));
  } catch {
    return { kind: 'invalid' };
  }
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    return { kind: 'object', value: value as Record<string, unknown> };
  }
  return { kind: 'non-object', value };
}

export function headerValue(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}
