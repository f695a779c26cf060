import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

export const MAX_BODY_BYTES = 1_000_000;

export interface HermErrorBody {
  error: { type: string; message: string; retryable?: boolean };
}

export function hermError(type: string, message: string, retryable?: boolean): HermErrorBody {
  return { error: retryable === undefined ? { type, message } : { type, message, retryable } };
}

export const INVALID_API_KEY = hermError('authentication_error', 'invalid x-api-key');
export const NOT_FOUND = hermError('not_found_error', 'not found');
export const BODY_TOO_LARGE = hermError('invalid_request_error', `request body exceeds ${MAX_BODY_BYTES} bytes`);
export const RESPONSE_EXPIRED = hermError('response_expired', 'the session stopped waiting for this tool result', false);
export const DEFAULT_FAULT_BODY = JSON.stringify(hermError('api_error', 'simulated fault', true));

export function sendText(res: ServerResponse, status: number, body: string, contentType = 'application/json'): void {
  if (res.headersSent || res.destroyed) return;
  const bytes = Buffer.from(body, 'utf8');
  res.setHeader('Content-Type', contentType);
  res.setHeader('Content-Length', String(bytes.length));
  res.writeHead(status);
  res.end(bytes);
}

export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  sendText(res, status, JSON.stringify(value));
}

/** Constant-time comparison of `x-api-key` (a repeated header never matches). */
export function hasApiKey(req: IncomingMessage, apiKey: string): boolean {
  const header = req.headers['x-api-key'];
  if (typeof header !== 'string') return false;
  const offered = Buffer.from(header, 'utf8');
  const expected = Buffer.from(apiKey, 'utf8');
  if (offered.length !== expected.length) {
    timingSafeEqual(expected, expected);
    return false;
  }
  return timingSafeEqual(offered, expected);
}

export type HermRoute = { kind: 'events'; sessionId: string } | { kind: 'stream'; sessionId: string } | { kind: 'not-found' };

/** `POST /v1/sessions/{session_id}/events` and `GET /v1/sessions/{session_id}/stream`; the id is one decoded segment. */
export function matchHermRoute(method: string, rawTarget: string): HermRoute {
  const query = rawTarget.indexOf('?');
  const segments = (query >= 0 ? rawTarget.slice(0, query) : rawTarget).split('/');
  if (segments.length !== 5 || segments[0] !== '' || segments[1] !== 'v1' || segments[2] !== 'sessions') return { kind: 'not-found' };
  const sessionId = decodeSegment(segments[3] ?? '');
  if (sessionId === undefined || sessionId === '') return { kind: 'not-found' };
  if (segments[4] === 'events' && method === 'POST') return { kind: 'events', sessionId };
  if (segments[4] === 'stream' && method === 'GET') return { kind: 'stream', sessionId };
  return { kind: 'not-found' };
}

function decodeSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}
