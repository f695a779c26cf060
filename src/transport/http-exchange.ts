import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { CallScope } from './call-scope.js';
import { transportFailure, type BodyLimit, type BufferedResponse, type ProviderRequest, type RequestTarget, type TransportStage } from './http.js';

/**
 * Sends one request and reads its whole answer into memory, for the JSON operations.
 * `bodyLimit` decides from the status and headers how many body bytes to accept: a body it
 * refuses (0) or that grows past the limit is not read on, and its connection is closed.
 * Resolves for any HTTP status; throws HermesFailure for transport trouble and aborts, with the
 * status as `remoteStatus` when the response's headers had come.
 *
 * This is undici's dispatch() with a handler of our own rather than request(): no response
 * stream, async resource or abort listener per call, which on a loopback request is a large
 * share of the client's work (bench/).
 */
export function exchange(target: RequestTarget, request: ProviderRequest, scope: CallScope, bodyLimit: BodyLimit): Promise<BufferedResponse> {
  return new Promise((resolve, reject) => {
    const handler = new BufferingHandler(bodyLimit, resolve, reject, scope, target.peer);
    // The handler is the abort target itself: no closure per call.
    scope.onAbort(handler);
    const options: Dispatcher.DispatchOptions = {
      origin: target.origin,
      path: request.path,
      method: request.method,
      headers: request.headers,
      body: request.body ?? null,
      headersTimeout: request.headersTimeoutMs,
      bodyTimeout: request.bodyTimeoutMs,
    };
    try {
      target.dispatcher.dispatch(options, handler);
    } catch (error) {
      // undici reports through the handler; an injected dispatcher might throw instead.
      handler.onResponseError(undefined, error as Error);
    }
  });
}

class BufferingHandler implements Dispatcher.DispatchHandler {
  readonly #bodyLimit: BodyLimit;
  readonly #resolve: (response: BufferedResponse) => void;
  readonly #rejectPromise: (failure: unknown) => void;
  readonly #scope: CallScope;
  readonly #peer: string;
  #controller: Dispatcher.DispatchController | undefined;
  /** An abort that came before undici started the request (it waits for a connection): applied when it starts. */
  #pendingAbort: Error | undefined;
  #response: BufferedResponse | undefined;
  #limit = 0;
  /** The body's first chunk, and the rest when it comes in several (a JSON answer mostly comes in one). */
  #first: Buffer | undefined;
  #more: Buffer[] | undefined;
  #size = 0;
  #settled = false;

  constructor(bodyLimit: BodyLimit, resolve: (response: BufferedResponse) => void, reject: (failure: unknown) => void, scope: CallScope, peer: string) {
    this.#bodyLimit = bodyLimit;
    this.#resolve = resolve;
    this.#rejectPromise = reject;
    this.#scope = scope;
    this.#peer = peer;
  }

  /** `statusCode` is the response's, when its headers had arrived. */
  #reject(error: unknown, stage: TransportStage, statusCode?: number): void {
    this.#rejectPromise(transportFailure(error, this.#scope, this.#peer, stage, statusCode));
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
    this.#limit = this.#bodyLimit(statusCode, headers);
    const declared = Number(headers['content-length']);
    if (this.#limit === 0 || declared > this.#limit) this.#stopReading(controller);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#settled) return;
    this.#size += chunk.length;
    if (this.#size > this.#limit) this.#stopReading(controller);
    else if (this.#first === undefined) this.#first = chunk;
    else if (this.#more === undefined) this.#more = [chunk];
    else this.#more.push(chunk);
  }

  onResponseEnd(): void {
    if (this.#settled) return;
    this.#settled = true;
    const response = this.#response;
    if (!response) {
      this.#reject(new Error('the response ended before its headers'), 'request');
      return;
    }
    const first = this.#first ?? Buffer.alloc(0);
    response.body = this.#more ? Buffer.concat([first, ...this.#more], this.#size) : first;
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
    this.#first = undefined;
    this.#more = undefined;
    this.#resolve(this.#response as BufferedResponse);
    controller.abort(new Error('response body not wanted'));
  }
}
