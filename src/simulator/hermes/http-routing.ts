import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { SimulatorRoute } from './types.js';
import { headerValue, type HeaderList } from './wire.js';

export type RouteMatch = { kind: 'route'; route: SimulatorRoute; runId: string } | { kind: 'not-found' } | { kind: 'method-not-allowed'; allow: string };

interface RouteShape {
  route: SimulatorRoute;
  method: 'GET' | 'POST';
  /** Segments after `/v1/runs/{run_id}`; undefined for the collection route. */
  suffix?: string;
}

const ROUTES: RouteShape[] = [
  { route: 'start', method: 'POST' },
  { route: 'status', method: 'GET', suffix: '' },
  { route: 'events', method: 'GET', suffix: 'events' },
  { route: 'approval', method: 'POST', suffix: 'approval' },
  { route: 'stop', method: 'POST', suffix: 'stop' },
];
/** Served from 0.20.1 on. */
const STEER_ROUTE: RouteShape = { route: 'steer', method: 'POST', suffix: 'steer' };
const CAPABILITIES_PATH = '/v1/capabilities';

const HEALTH_PATHS: ReadonlySet<string> = new Set(['/health', '/v1/health']);

/**
 * Splits the raw target on '/' first, then decodes each segment (so `%2F` stays inside a run id).
 * It routes `GET /v1/capabilities` with `capabilities`, and `POST /v1/runs/{id}/steer` with `steer`.
 */
export function matchRoute(method: string, rawTarget: string, options: { capabilities?: boolean; steer?: boolean } = {}): RouteMatch {
  // aiohttp answers HEAD on GET routes with the GET handler.
  const effective = method === 'HEAD' ? 'GET' : method;
  if (HEALTH_PATHS.has(rawPathOf(rawTarget))) {
    return effective === 'GET' ? { kind: 'route', route: 'health', runId: '' } : { kind: 'method-not-allowed', allow: 'GET,HEAD' };
  }
  if (options.capabilities === true && rawPathOf(rawTarget) === CAPABILITIES_PATH) {
    return effective === 'GET' ? { kind: 'route', route: 'capabilities', runId: '' } : { kind: 'method-not-allowed', allow: 'GET,HEAD' };
  }
  const segments = rawPathOf(rawTarget).split('/');
  if (segments[0] !== '' || segments[1] !== 'v1' || segments[2] !== 'runs') return { kind: 'not-found' };
  const shape = shapeOf(segments.slice(3), options.steer === true);
  if (!shape) return { kind: 'not-found' };
  const runId = segments[3] === undefined ? '' : decodeSegment(segments[3]);
  if (effective !== shape.method) return { kind: 'method-not-allowed', allow: shape.method === 'GET' ? 'GET,HEAD' : 'POST' };
  return { kind: 'route', route: shape.route, runId };
}

function shapeOf(rest: string[], steer: boolean): RouteShape | undefined {
  if (rest.length === 0) return ROUTES[0];
  const [rawId, suffix = '', ...extra] = rest;
  if (rawId === undefined || !isRunIdSegment(rawId) || extra.length > 0) return undefined;
  if (rest.length === 1) return ROUTES[1];
  if (steer && suffix === STEER_ROUTE.suffix) return STEER_ROUTE;
  return ROUTES.find((shape) => shape.suffix !== undefined && shape.suffix !== '' && shape.suffix === suffix);
}

/** aiohttp's `{run_id}` matches `[^{}/]+`. */
function isRunIdSegment(segment: string): boolean {
  return segment.length > 0 && !/[{}]/.test(segment);
}

export function rawPathOf(rawTarget: string): string {
  const query = rawTarget.indexOf('?');
  return query >= 0 ? rawTarget.slice(0, query) : rawTarget;
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

export function decodePath(rawTarget: string): string {
  return decodeSegment(rawPathOf(rawTarget));
}

/** `Bearer <key>` (case-sensitive prefix), then a constant-time comparison of the stripped rest. */
export function isAuthorized(req: IncomingMessage, apiKey: string): boolean {
  const header = headerValue(req, 'authorization');
  if (header === undefined || !header.startsWith('Bearer ')) return false;
  const offered = Buffer.from(header.slice('Bearer '.length).trim(), 'utf8');
  const expected = Buffer.from(apiKey, 'utf8');
  if (offered.length !== expected.length) {
    timingSafeEqual(expected, expected);
    return false;
  }
  return timingSafeEqual(offered, expected);
}

export type CorsDecision = { kind: 'no-origin' } | { kind: 'forbidden' } | { kind: 'allowed'; headers: HeaderList };

export function corsDecision(req: IncomingMessage, allowedOrigins: readonly string[]): CorsDecision {
  const origin = headerValue(req, 'origin');
  if (origin === undefined || origin === '') return { kind: 'no-origin' };
  const wildcard = allowedOrigins.includes('*');
  if (!wildcard && !allowedOrigins.includes(origin)) return { kind: 'forbidden' };
  const headers: HeaderList = [
    ['Access-Control-Allow-Origin', wildcard ? '*' : origin],
    ['Access-Control-Allow-Methods', 'GET, POST, DELETE, OPTIONS'],
    ['Access-Control-Allow-Headers', 'Authorization, Content-Type, Idempotency-Key'],
    ['Access-Control-Max-Age', '600'],
  ];
  if (!wildcard) headers.push(['Vary', 'Origin']);
  return { kind: 'allowed', headers };
}

export type SessionKeyCheck = { kind: 'ok'; key: string | undefined } | { kind: 'invalid'; message: string };

export function checkSessionKey(req: IncomingMessage): SessionKeyCheck {
  const key = (headerValue(req, 'x-hermes-session-key') ?? '').trim();
  if (key === '') return { kind: 'ok', key: undefined };
  if (/[\r\n\0]/.test(key)) return { kind: 'invalid', message: 'Invalid session key' };
  if (key.length > 256) return { kind: 'invalid', message: 'Session key too long' };
  return { kind: 'ok', key };
}

export type IdempotencyKeyCheck = { kind: 'absent' } | { kind: 'ok'; key: string } | { kind: 'invalid' };

/** `later` profile: 1–255 visible ASCII characters. */
export function checkIdempotencyKey(req: IncomingMessage): IdempotencyKeyCheck {
  const key = headerValue(req, 'idempotency-key');
  if (key === undefined) return { kind: 'absent' };
  return /^[\x21-\x7e]{1,255}$/.test(key) ? { kind: 'ok', key } : { kind: 'invalid' };
}
