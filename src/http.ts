import type { IncomingHttpHeaders } from 'node:http';
import { Pool, type Dispatcher } from 'undici';
import type { CallScope } from './call-scope.js';
import type { ResolvedEndpoint } from './config.js';
import { HermesFailure, failureFromHttpStatus, parseRetryAfter, providerCodeOf, type ProviderEffect } from './failures.js';

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

const CONNECT_TIMEOUT_MS = 10_000;
const UTF8 = new TextDecoder('utf-8', { fatal: true });
const ERROR_BODY_LIMIT = 64 * 1024;
/** Errors raised before any request byte could reach the provider. */
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * One keep-alive pool per endpoint origin, created on first use and never following
 * redirects; or the injected dispatcher for every endpoint.
 */
export class EndpointPools {
  readonly #injected: Dispatcher | undefined;
  readonly #pools = new Map<string, Pool>();

  constructor(injected: Dispatcher | undefined) {
    this.#injected = injected;
  }

  dispatcherFor(endpoint: ResolvedEndpoint): Dispatcher {
    if (this.#injected) return this.#injected;
    let pool = this.#pools.get(endpoint.origin);
    if (!pool) {
      pool = new Pool(endpoint.origin, { connect: { timeout: CONNECT_TIMEOUT_MS } });
      this.#pools.set(endpoint.origin, pool);
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
export async function sendRequest(
  pools: EndpointPools,
  endpoint: ResolvedEndpoint,
  request: ProviderRequest,
  scope: CallScope,
): Promise<ProviderResponse> {
  const pending = pools.dispatcherFor(endpoint).request({
    origin: endpoint.origin,
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
    throw transportFailure(error, scope, endpoint.id, 'request');
  }
}

/**
 * The response, or the scope's abort, whichever comes first. undici applies an abort to a
 * request it has not started yet (one waiting for a pooled connection) only once it starts it;
 * the call must not wait that long. A response that still comes is released.
 */
function untilAborted(pending: Promise<ProviderResponse>, scope: CallScope): Promise<ProviderResponse> {
  if (scope.aborted) {
    pending.then((response) => response.body.destroy(), ignore);
    return Promise.reject(scope.reason);
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      pending.then((response) => response.body.destroy(), ignore);
      reject(scope.reason);
    };
    scope.signal.once('abort', onAbort);
    pending.then(
      (response) => {
        scope.signal.off('abort', onAbort);
        resolve(response);
      },
      (error: unknown) => {
        scope.signal.off('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** A response read whole into memory by exchange(). */
export interface BufferedResponse {
  statusCode: number;
  headers: IncomingHttpHeaders;
  /** The body; undefined when it was not read: refused by the body limit (0), or larger than it. */
  body: Buffer | undefined;
}

/**
 * Sends one request and reads its whole answer into memory, for the JSON operations.
 * `reading.bodyLimit` decides from the status and headers how many body bytes to accept: a
 * body it refuses (0) or that grows past the limit is not read on, and its connection is closed.
 * Resolves for any HTTP status; throws HermesFailure for transport trouble and aborts.
 *
 * This is undici's dispatch() with a handler of our own rather than request(): no response
 * stream, async resource or abort listener per call, which on a loopback request is a large
 * share of the client's work (bench/).
 */
export function exchange(
  pools: EndpointPools,
  endpoint: ResolvedEndpoint,
  request: ProviderRequest,
  scope: CallScope,
  reading: ResponseReading,
): Promise<BufferedResponse> {
  return new Promise((resolve, reject) => {
    const handler = new BufferingHandler(reading, resolve, (error, stage, statusCode) => reject(transportFailure(error, scope, endpoint.id, stage, statusCode)));
    scope.onAbort((reason) => handler.abort(reason));
    const options: Dispatcher.DispatchOptions = {
      origin: endpoint.origin,
      path: request.path,
      method: request.method,
      headers: request.headers,
      body: request.body ?? null,
      headersTimeout: request.headersTimeoutMs,
      bodyTimeout: request.bodyTimeoutMs,
    };
    try {
      pools.dispatcherFor(endpoint).dispatch(options, handler);
    } catch (error) {
      // undici reports through the handler; an injected dispatcher might throw instead.
      handler.onResponseError(undefined, error as Error);
    }
  });
}

export interface ResponseReading {
  /** How many body bytes to read for this status and these headers; 0 reads none. */
  bodyLimit(statusCode: number, headers: IncomingHttpHeaders): number;
  /** Called once the final status is known, before the body is read. */
  onStatus(statusCode: number): void;
}

class BufferingHandler implements Dispatcher.DispatchHandler {
  readonly #reading: ResponseReading;
  readonly #resolve: (response: BufferedResponse) => void;
  /** `statusCode` is the response's, when its headers had arrived. */
  readonly #reject: (error: unknown, stage: TransportStage, statusCode?: number) => void;
  #controller: Dispatcher.DispatchController | undefined;
  /** An abort that came before undici started the request (it waits for a connection): applied when it starts. */
  #pendingAbort: Error | undefined;
  #response: BufferedResponse | undefined;
  #limit = 0;
  #chunks: Buffer[] = [];
  #size = 0;
  #settled = false;

  constructor(reading: ResponseReading, resolve: (response: BufferedResponse) => void, reject: (error: unknown, stage: TransportStage, statusCode?: number) => void) {
    this.#reading = reading;
    this.#resolve = resolve;
    this.#reject = reject;
  }

  abort(reason: Error): void {
    if (this.#controller) {
      this.#controller.abort(reason);
      return;
    }
    // Queued behind other requests or still connecting: the call ends now, and undici will find
    // the request aborted when it starts it, before writing a byte.
    this.#pendingAbort = reason;
    if (this.#settled) return;
    this.#settled = true;
    this.#reject(reason, 'unsent');
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#pendingAbort) controller.abort(this.#pendingAbort);
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    if (statusCode < 200) return; // informational: the final response follows
    this.#response = { statusCode, headers, body: undefined };
    this.#reading.onStatus(statusCode);
    this.#limit = this.#reading.bodyLimit(statusCode, headers);
    const declared = Number(headers['content-length']);
    if (this.#limit === 0 || declared > this.#limit) this.#stopReading(controller);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#settled) return;
    this.#size += chunk.length;
    if (this.#size > this.#limit) this.#stopReading(controller);
    else this.#chunks.push(chunk);
  }

  onResponseEnd(): void {
    if (this.#settled) return;
    this.#settled = true;
    const response = this.#response;
    if (!response) {
      this.#reject(new Error('the response ended before its headers'), 'request');
      return;
    }
    const chunks = this.#chunks;
    response.body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, this.#size);
    this.#resolve(response);
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#reject(error, this.#response ? 'body' : 'request', this.#response?.statusCode);
  }

  /** Settles with what is known (no body) and closes the connection rather than read a body we will not use. */
  #stopReading(controller: Dispatcher.DispatchController): void {
    this.#settled = true;
    this.#chunks = [];
    this.#resolve(this.#response as BufferedResponse);
    controller.abort(new Error('response body not wanted'));
  }
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
export function transportFailure(error: unknown, scope: CallScope, endpointId: string, stage: TransportStage, remoteStatus?: number): HermesFailure {
  if (error instanceof HermesFailure) return error;
  const code = transportErrorCode(error);
  const notSent = stage === 'unsent' || (stage === 'request' && code !== undefined && NOT_SENT_CODES.has(code));
  const effect: ProviderEffect = notSent ? 'none' : 'maybe';
  const where = `Hermes endpoint \`${endpointId}\``;
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

/** What exchange() reads of a JSON operation's answer: a JSON success up to `limit` bytes, or a small error body. */
export function jsonReading(limit: number, onStatus: (statusCode: number) => void): ResponseReading {
  return {
    bodyLimit: (statusCode, headers) => (!isSuccess(statusCode) ? ERROR_BODY_LIMIT : isJsonContentType(headers['content-type']) ? limit : 0),
    onStatus,
  };
}

export function isSuccess(statusCode: number): boolean {
  return statusCode >= 200 && statusCode <= 299;
}

/**
 * The JSON value of a success read by exchange() with jsonReading(). Bodies that are not JSON,
 * too large, undecodable or unparsable are `invalid_response`.
 */
export function jsonBodyOf(response: BufferedResponse, limit: number, endpointId: string): unknown {
  const invalid = (why: string) =>
    new HermesFailure('invalid_response', `Hermes endpoint \`${endpointId}\` sent ${why}`, { effect: 'maybe', remoteStatus: response.statusCode });
  if (!isJsonContentType(response.headers['content-type'])) throw invalid('a success response that is not JSON');
  if (response.body === undefined) throw invalid(`a body larger than ${limit} bytes`);
  let text: string;
  try {
    text = UTF8.decode(response.body);
  } catch {
    throw invalid('a body that is not valid UTF-8');
  }
  try {
    return JSON.parse(text);
  } catch {
    throw invalid('a body that is not valid JSON');
  }
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

/** Consumes what is left of a body we do not need, so its connection is released. */
export async function discardBody(response: ProviderResponse): Promise<void> {
  try {
    await response.body.dump({ limit: ERROR_BODY_LIMIT });
  } catch {
    response.body.destroy();
  }
}

function isJsonContentType(value: string | string[] | undefined): boolean {
  return contentTypeMatches(value, /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i);
}

export function isEventStreamContentType(value: string | string[] | undefined): boolean {
  return contentTypeMatches(value, /^text\/event-stream\s*(?:;|$)/i);
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
