import { CallScope } from '../transport/call-scope.js';
import { writesAt } from '../internal/logger.js';
import { HermesFailure } from '../failures.js';
import { buildHeaders } from '../transport/headers.js';
import { exchange } from '../transport/http-exchange.js';
import { failureFromAnswer, isSuccess, jsonBodyLimit, jsonBodyOf } from '../transport/http.js';
import { endRequestSpan, errorTypeOf } from '../telemetry.js';
import type { OperationCall, OperationOutcome, Route } from './operation.js';

export interface JsonRequest {
  method: 'GET' | 'POST';
  route: Route;
  body?: unknown;
  sessionKey?: string;
}

/** The shared request/response flow of the JSON operations: one request, a bounded JSON answer. */
export async function callJson(call: OperationCall<unknown>, request: JsonRequest): Promise<OperationOutcome> {
  const { endpoint, config } = call;
  const body = request.body === undefined ? undefined : JSON.stringify(request.body);
  if (body !== undefined && Buffer.byteLength(body) > config.limits.maxRequestBodyBytes) {
    throw new HermesFailure('invalid_input', `The request body is larger than ${config.limits.maxRequestBodyBytes} bytes`);
  }
  const headers = buildHeaders({
    endpoint,
    action: call.action,
    context: call.context,
    accept: 'application/json',
    hasBody: body !== undefined,
    sessionKey: request.sessionKey,
  });
  const timeoutMs = call.declaration.http.provider_timeout_ms ?? undefined;
  const scope = new CallScope({ signal: call.context.signal, openCalls: call.openCalls, deadline: call.deadline, timeoutMs, now: config.now });
  const { path, template } = request.route;
  const span = call.telemetry.startRequest(call.traceContext, { method: request.method, template, server: endpoint.server }, headers);
  let statusCode: number | undefined;
  let errorType: string | undefined;
  try {
    // The bindings object only when the line is written: most hosts do not log at trace.
    if (writesAt(call.logger, 'trace')) call.logger.trace({ method: request.method, path }, 'hermes request');
    const limit = config.limits.maxJsonResponseBytes;
    const response = await exchange(
      call.pools.targetFor(endpoint),
      { method: request.method, path, headers, body, headersTimeoutMs: timeoutMs ?? 0, bodyTimeoutMs: timeoutMs ?? 0 },
      scope,
      jsonBodyLimit(limit),
    );
    statusCode = response.statusCode;
    call.onHttpStatus(statusCode);
    if (!isSuccess(statusCode)) throw failureFromAnswer(response, endpoint, config.now);
    const output = jsonBodyOf(response, limit, endpoint);
    return { status: 'completed', output };
  } catch (error) {
    errorType = errorTypeOf(error);
    // A response whose body then failed: its status, for the receipt and the span.
    if (statusCode === undefined && error instanceof HermesFailure && error.remoteStatus !== undefined) {
      statusCode = error.remoteStatus;
      call.onHttpStatus(statusCode);
    }
    throw error;
  } finally {
    scope.dispose();
    endRequestSpan(span, statusCode, errorType);
  }
}
