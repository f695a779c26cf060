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

/** Sends one request. Resolves with the response for any HTTP status; throws HermesFailure for transport trouble. */
export async function sendRequest(
  pools: EndpointPools,
  endpoint: ResolvedEndpoint,
  request: ProviderRequest,
  scope: CallScope,
): Promise<ProviderResponse> {
  try {
    const response = await pools.dispatcherFor(endpoint).request({
      origin: endpoint.origin,
      path: request.path,
      method: request.method,
      headers: request.headers,
      body: request.body ?? null,
      signal: scope.signal,
      headersTimeout: request.headersTimeoutMs,
      bodyTimeout: request.bodyTimeoutMs,
    });
    // An abort after the headers surfaces as an 'error' on the body; never let it go unhandled.
    response.body.on('error', ignore);
    return response;
  } catch (error) {
    throw transportFailure(error, scope, endpoint.id, 'request');
  }
}

/**
 * The failure for a thrown transport error or abort. `stage` says whether the response
 * headers had already arrived, which decides what the provider may have done.
 */
export function transportFailure(error: unknown, scope: CallScope, endpointId: string, stage: 'request' | 'body'): HermesFailure {
  if (error instanceof HermesFailure) return error;
  const code = transportErrorCode(error);
  const effect: ProviderEffect = stage === 'request' && code !== undefined && NOT_SENT_CODES.has(code) ? 'none' : 'maybe';
  const where = `Hermes endpoint \`${endpointId}\``;
  switch (scope.cause) {
    case 'cancelled':
      return new HermesFailure('cancelled', `The call to ${where} was cancelled by the caller`, { effect });
    case 'closed':
      return new HermesFailure('cancelled', `The call to ${where} was cancelled because the connector was closed`, { effect });
    case 'deadline':
      return new HermesFailure('deadline_exceeded', `The AIP deadline passed during the call to ${where}`, { effect });
    case 'timeout':
      return new HermesFailure('transport', `${where} did not answer within the operation timeout`, { effect, details: { timeout: true } });
    default:
      return new HermesFailure('transport', `Transport failure talking to ${where}${code ? ` (${code})` : ''}`, {
        effect,
        details: code ? { transport_code: code } : undefined,
      });
  }
}

/** Maps a non-2xx response to its failure, reading at most a small error body for Hermes' `error.code`. */
export async function failureFromResponse(response: ProviderResponse, endpoint: ResolvedEndpoint, now: () => number): Promise<HermesFailure> {
  const body = await readErrorBody(response);
  const providerCode = providerCodeOf(body, endpoint.apiKey?.reveal());
  return failureFromHttpStatus(response.statusCode, endpoint.id, providerCode, parseRetryAfter(response.headers['retry-after'], now()));
}

async function readErrorBody(response: ProviderResponse): Promise<unknown> {
  try {
    const bytes = await readBoundedBytes(response, ERROR_BODY_LIMIT);
    return bytes === undefined ? undefined : JSON.parse(UTF8.decode(bytes));
  } catch {
    return undefined;
  }
}

/**
 * Reads and parses a JSON response body of at most `limit` bytes. Too large, undecodable
 * or unparsable bodies are `invalid_response`; the body is always consumed or destroyed.
 */
export async function readJsonBody(
  response: ProviderResponse,
  limit: number,
  scope: CallScope,
  endpointId: string,
): Promise<unknown> {
  const invalid = (why: string) =>
    new HermesFailure('invalid_response', `Hermes endpoint \`${endpointId}\` sent ${why}`, { effect: 'maybe', remoteStatus: response.statusCode });
  if (!isJsonContentType(response.headers['content-type'])) {
    response.body.destroy();
    throw invalid('a success response that is not JSON');
  }
  let bytes: Uint8Array | undefined;
  try {
    bytes = await readBoundedBytes(response, limit);
  } catch (error) {
    throw transportFailure(error, scope, endpointId, 'body');
  }
  if (bytes === undefined) throw invalid(`a body larger than ${limit} bytes`);
  let text: string;
  try {
    text = UTF8.decode(bytes);
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
  const type = Array.isArray(value) ? value[0] : value;
  return type !== undefined && /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i.test(type);
}

/** A transport error's stable code (`ECONNRESET`, `UND_ERR_SOCKET`, …), never its free-text message. */
export function transportErrorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{1,64}$/.test(code) ? code : undefined;
}

function ignore(): void {}
