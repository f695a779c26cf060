import { CallScope } from '../call-scope.js';
import { HermesFailure } from '../failures.js';
import { buildHeaders } from '../headers.js';
import { exchange } from '../http-exchange.js';
import { failureFromAnswer, isSuccess, jsonBodyOf, jsonReading } from '../http.js';
import type { OperationCall, OperationOutcome } from './operation.js';

export interface JsonRequest {
  method: 'GET' | 'POST';
  path: string;
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
  try {
    call.logger.trace({ method: request.method, path: request.path }, 'hermes request');
    const limit = config.limits.maxJsonResponseBytes;
    const response = await exchange(
      call.pools,
      endpoint,
      { method: request.method, path: request.path, headers, body, headersTimeoutMs: timeoutMs ?? 0, bodyTimeoutMs: timeoutMs ?? 0 },
      scope,
      jsonReading(limit, call.onHttpStatus),
    );
    if (!isSuccess(response.statusCode)) throw failureFromAnswer(response, endpoint, config.now);
    const output = jsonBodyOf(response, limit, endpoint);
    return { status: 'completed', output };
  } finally {
    scope.dispose();
  }
}
