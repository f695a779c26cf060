import type { IncomingHttpHeaders } from 'node:http';
import { Pool, type Dispatcher } from 'undici';
import type { CallScope } from './call-scope.js';
import type { ResolvedEndpoint } from '../config.js';
import { MAX_PROVIDER_JSON_DEPTH, parseProviderJson, type ProviderJsonRefused } from './provider-json.js';
import { decodeUtf8 } from './utf8.js';
import { HermesFailure, failureFromHttpStatus, parseRetryAfter, providerCodeOf, type ProviderEffect } from '../failures.js';

export interface ProviderRequest {
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: string;
  /** undici's time-to-headers and idle-body timers; the scope's signal bounds the whole call. */
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
}

export type ProviderResponse = Dispatcher.ResponseData;

/** A response read whole into memory by exchange(). */
export interface BufferedResponse {
  statusCode: number;
  headers: IncomingHttpHeaders;
  /** The body; undefined when it was not read: refused by the body limit (0), or larger than it. */
  body: Buffer | undefined;
}

const CONNECT_TIMEOUT_MS = 10_000;
const UTF8 = new TextDecoder('utf-8', { fatal: true });
const ERROR_BODY_LIMIT = 64 * 1024;
/** Errors raised before any request byte could reach the provider. */
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT', 'EHOSTUNREACH', 'ENETUNREACH']);

/** Where a request goes: the dispatcher, the origin, and how a failure names the peer. */
export interface RequestTarget {
  readonly dispatcher: Dispatcher;
  readonly origin: string;
  /** E.g. "Hermes endpoint `prod`": failure messages say who failed, never a URL. */
  readonly peer: string;
}

/** A keep-alive pool for one origin: the connector's and the bridge's only connection settings. Redirects are never followed. */
export function createOriginPool(origin: string): Pool {
  return new Pool(origin, { connect: { timeout: CONNECT_TIMEOUT_MS } });
}

/**
 * One keep-alive pool per endpoint origin, created on first use; or the injected dispatcher for
 * every endpoint. Each endpoint's request target is built once.
 */
export class EndpointPools {
  readonly #injected: Dispatcher | undefined;
  readonly #pools = new Map<string, Pool>();
  readonly #targets = new Map<string, RequestTarget>();

  constructor(injected: Dispatcher | undefined) {
    this.#injected = injected;
  }

  targetFor(endpoint: ResolvedEndpoint): RequestTarget {
    let target = this.#targets.get(endpoint.id);
    if (!target) {
      target = { dispatcher: this.#dispatcherFor(endpoint.origin), origin: endpoint.origin, peer: `Hermes endpoint \`${endpoint.id}\`` };
      this.#targets.set(endpoint.id, target);
    }
    return target;
  }

  #dispatcherFor(origin: string): Dispatcher {
    if (this.#injected) return this.#injected;
    let pool = this.#pools.get(origin);
    if (!pool) {
      pool = createOriginPool(origin);
      this.#pools.set(origin, pool);
    }
    return pool;
  }

  async close(): Promise<void> {
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    await Promise.all(pools.map((pool) => pool.close()));
  }
}

/**
 * Sends one request whose body is read as a stream (run_events). Resolves with the response for
 * any HTTP status; throws HermesFailure for transport trouble and aborts.
 */
export async function sendRequest(target: RequestTarget, request: ProviderRequest, scope: CallScope): Promise<ProviderResponse> {
  const pending = target.dispatcher.request({
    origin: target.origin,
    path: request.path,
    method: request.method,
    headers: request.headers,
    body: request.body ?? null,
    signal: scope.signal,
    headersTimeout: request.headersTimeoutMs,
    bodyTimeout: request.bodyTimeoutMs,
  });
  try {
    const response = await untilAborted(pending, scope);
    // An abort after the headers surfaces as an 'error' on the body; never let it go unhandled.
    response.body.on('error', ignore);
    return response;
  } catch (error) {
    throw transportFailure(error, scope, target.peer, 'request');
  }
}

/**
 * The response, or the scope's abort, whichever comes first. undici applies an abort to a
 * request it has not started yet (one waiting for a pooled connection) only once it starts it;
 * the call must not wait that long. A response that still comes is released.
 */
function untilAborted(pending: Promise<ProviderResponse>, scope: CallScope): Promise<ProviderResponse> {
  return scope.race(pending, (response) => response.body.destroy());
}

/**
 * How far a request got when it failed: `unsent` (undici had not started it: certainly nothing
 * sent), `request` (started, no response headers yet) or `body` (headers arrived).
 */
export type TransportStage = 'unsent' | 'request' | 'body';

/**
 * The failure for a thrown transport error or abort. `stage` decides what the provider may have
 * done; the response status, when known, is reported as `details.remote_status`.
 */
export function transportFailure(error: unknown, scope: CallScope, peer: string, stage: TransportStage, remoteStatus?: number): HermesFailure {
  if (error instanceof HermesFailure) return error;
  const code = transportErrorCode(error);
  const notSent = stage === 'unsent' || (stage === 'request' && code !== undefined && NOT_SENT_CODES.has(code));
  const effect: ProviderEffect = notSent ? 'none' : 'maybe';
  const where = peer;
  switch (scope.cause) {
    case 'cancelled':
      return new HermesFailure('cancelled', `The call to ${where} was cancelled by the caller`, { effect, remoteStatus });
    case 'closed':
      return new HermesFailure('cancelled', `The call to ${where} was cancelled because the connector was closed`, { effect, remoteStatus });
    case 'deadline':
      return new HermesFailure('deadline_exceeded', `The AIP deadline passed during the call to ${where}`, { effect, remoteStatus });
    case 'timeout':
      return new HermesFailure('transport', `${where} did not answer within the operation timeout`, { effect, remoteStatus, details: { timeout: true } });
    default:
      return new HermesFailure('transport', `Transport failure talking to ${where}${code ? ` (${code})` : ''}`, {
        effect,
        remoteStatus,
        details: code ? { transport_code: code } : undefined,
      });
  }
}

/** Maps a non-2xx streamed response to its failure, reading at most a small error body for Hermes' `error.code`. */
export async function failureFromResponse(response: ProviderResponse, endpoint: ResolvedEndpoint, now: () => number): Promise<HermesFailure> {
  const body = await readBoundedBytes(response, ERROR_BODY_LIMIT).catch(() => undefined);
  return failureFromAnswer({ statusCode: response.statusCode, headers: response.headers, body }, endpoint, now);
}

/** Maps a non-2xx answer to its failure, with Hermes' `error.code` from its body when that is small JSON. */
export function failureFromAnswer(
  answer: { statusCode: number; headers: IncomingHttpHeaders; body: Uint8Array | undefined },
  endpoint: ResolvedEndpoint,
  now: () => number,
): HermesFailure {
  const providerCode = providerCodeOf(parseErrorBody(answer.body), endpoint.apiKey?.reveal());
  return failureFromHttpStatus(answer.statusCode, endpoint.id, providerCode, parseRetryAfter(answer.headers['retry-after'], now()));
}

function parseErrorBody(bytes: Uint8Array | undefined): unknown {
  if (bytes === undefined) return undefined;
  try {
    return JSON.parse(UTF8.decode(bytes));
  } catch {
    return undefined;
  }
}

/** How many body bytes exchange() reads for this status and these headers; 0 reads none. */
export type BodyLimit = (statusCode: number, headers: IncomingHttpHeaders) => number;

/** What exchange() reads of a JSON operation's answer: a JSON success up to `limit` bytes, or a small error body. */
export function jsonBodyLimit(limit: number): BodyLimit {
  return (statusCode, headers) => (!isSuccess(statusCode) ? ERROR_BODY_LIMIT : isJsonContentType(headers['content-type']) ? limit : 0);
}

export function isSuccess(statusCode: number): boolean {
  return statusCode >= 200 && statusCode <= 299;
}

/**
 * The JSON value of a success read by exchange() with jsonBodyLimit(), with the endpoint's key
 * redacted. Bodies that are not JSON, too large, undecodable, unparsable or nested too deep are
 * `invalid_response`.
 */
export function jsonBodyOf(response: BufferedResponse, limit: number, endpoint: ResolvedEndpoint): unknown {
  // jsonBodyLimit() reads a success's body only when it is JSON: without one, the type or the size refused it.
  if (response.body === undefined) {
    throw invalidBody(
      response,
      endpoint,
      isJsonContentType(response.headers['content-type']) ? `a body larger than ${limit} bytes` : 'a success response that is not JSON',
    );
  }
  const text = decodeUtf8(response.body);
  if (text === undefined) throw invalidBody(response, endpoint, 'a body that is not valid UTF-8');
  try {
    return parseProviderJson(text, endpoint.apiKey?.reveal());
  } catch (error) {
    const tooDeep = (error as ProviderJsonRefused).reason === 'too_deep';
    throw invalidBody(response, endpoint, tooDeep ? `a body nested more than ${MAX_PROVIDER_JSON_DEPTH} levels deep` : 'a body that is not valid JSON');
  }
}

function invalidBody(response: BufferedResponse, endpoint: ResolvedEndpoint, why: string): HermesFailure {
  return new HermesFailure('invalid_response', `Hermes endpoint \`${endpoint.id}\` sent ${why}`, { effect: 'maybe', remoteStatus: response.statusCode });
}

/** The whole body, or undefined (body destroyed) when it exceeds `limit` bytes. */
async function readBoundedBytes(response: ProviderResponse, limit: number): Promise<Uint8Array | undefined> {
  const { body } = response;
  const declared = Number(response.headers['content-length']);
  if (Number.isFinite(declared)) {
    if (declared > limit) {
      body.destroy();
      return undefined;
    }
    // undici's parser delivers exactly the declared length, so the limit already holds: read it in one go.
    return body.bytes();
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      body.destroy();
      return undefined;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}

/** `application/json` or any `application/*+json`, parameters allowed. */
const JSON_MEDIA_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;
const EVENT_STREAM_MEDIA_TYPE = /^text\/event-stream\s*(?:;|$)/i;

function isJsonContentType(value: string | string[] | undefined): boolean {
  return contentTypeMatches(value, JSON_MEDIA_TYPE);
}

export function isEventStreamContentType(value: string | string[] | undefined): boolean {
  return contentTypeMatches(value, EVENT_STREAM_MEDIA_TYPE);
}

/** The media type of the (first) Content-Type, compared as a whole token: `text/event-streamx` is not `text/event-stream`. */
function contentTypeMatches(value: string | string[] | undefined, mediaType: RegExp): boolean {
  const type = Array.isArray(value) ? value[0] : value;
  return type !== undefined && mediaType.test(type);
}

/** A transport error's stable code (`ECONNRESET`, `UND_ERR_SOCKET`, …), never its free-text message. */
export function transportErrorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{1,64}$/.test(code) ? code : undefined;
}

function ignore(): void {}
