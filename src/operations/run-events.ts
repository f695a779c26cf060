import { CallScope } from '../transport/call-scope.js';
import { HermesFailure } from '../failures.js';
import { buildHeaders } from '../transport/headers.js';
import {
  failureFromResponse,
  isEventStreamContentType,
  isSuccess,
  sendRequest,
  transportErrorCode,
  transportFailure,
  type ProviderResponse,
} from '../transport/http.js';
import { statusOfTerminalEvent } from '../contract/hermes-vocabulary.js';
import type { RunEvidencePatch } from '../ledger/types.js';
import { SseDecoder, type SseItem } from '../transport/sse.js';
import type { RunEventsOutput } from '../types.js';
import { endRequestSpan, errorTypeOf, StreamTrace } from '../telemetry.js';
import { checkRunId, runRoute, type Operation, type OperationCall } from './operation.js';
import { CLOSED, joinText, newReader, type RunEventsInput, settle, type StreamEnd, type StreamReader, takeAll } from './event-reader.js';
import { readJournal } from './run-events-journal.js';
import { statusPatch } from './run-status.js';

/** Hermes looks for the run's stream for about a second before it answers; anything past this is a dead peer. */
const SSE_HEADERS_TIMEOUT_MS = 30_000;

/** How often one run_events call reopens a cut stream with `?last_seq=`. */
const MAX_RESUMPTIONS = 3;

/**
 * GET /v1/runs/{run_id}/events: reads the run's SSE stream to its terminal event,
 * publishing each event as a chunk. A stream that closes without a terminal event is
 * reconciled with one status read and reported as incomplete, never as completed.
 */
export const runEvents: Operation<RunEventsInput> = {
  name: 'run_events',
  checkInput: ({ run_id }) => checkRunId(run_id),
  async execute(call) {
    if (call.journal) {
      const fromJournal = await readJournal(call, call.journal);
      if (fromJournal) return fromJournal;
    }
    if (call.input.after_sequence !== undefined) {
      throw new HermesFailure('invalid_input', '`after_sequence` reads the run journal, and this run has none (the journal is off, or did not follow it)');
    }
    const { endpoint, config } = call;
    const output: RunEventsOutput = { endpoint_id: endpoint.id, operation: 'run_events', http_status: 0, events: [], text: '', terminal: false };
    const headers = buildHeaders({ endpoint, action: call.action, context: call.context, accept: 'text/event-stream', hasBody: false });
    const scope = new CallScope({ signal: call.context.signal, openCalls: call.openCalls, deadline: call.deadline, timeoutMs: undefined, now: config.now });
    const route = runRoute(call.input.run_id, '/events');
    const span = call.telemetry.startRequest(call.traceContext, { method: 'GET', template: route.template, server: endpoint.server }, headers);
    const trace = new StreamTrace(call.telemetry, span);
    const reader = newReader(call, output, scope, trace);
    let statusCode: number | undefined;
    let end: StreamEnd;
    try {
      const response = await openStream(call, route.path, headers, scope, reader.resumedAfter);
      statusCode = response.statusCode;
      output.http_status = response.statusCode;
      end = await readStream(call, response, reader);
      end = await resume(call, route.path, headers, reader, end);
    } catch (error) {
      const failure = transportFailure(error, scope, call.pools.targetFor(endpoint).peer, 'body', output.http_status || undefined);
      trace.finish(output.events);
      endRequestSpan(span, statusCode, errorTypeOf(failure));
      return { status: failure.code === 'cancelled' ? 'cancelled' : 'failed', output: output.http_status ? output : undefined, failure };
    } finally {
      scope.dispose();
    }
    trace.finish(output.events);
    endRequestSpan(span, statusCode, end.kind === 'broken' ? (end.transportCode ?? 'stream_incomplete') : undefined);
    return settle(call, output, end);
  },
  learnAboutRun: ({ result, now }) => eventsPatch(result.output as RunEventsOutput | undefined, now),
  // Every event comes from the SSE decoder as {event: non-empty string, data: JSON object, id?: string},
  // which is all the schema asks of an item: checking 100,000 of them took ajv 0.6-9 ms (cold after a full GC).
  checkedOutput: (output) => ({ ...(output as RunEventsOutput), events: [] }),
};

/** The stream's terminal event, else what its reconciliation read found (a 404: evidence lost). */
function eventsPatch(output: RunEventsOutput | undefined, now: number): RunEvidencePatch | undefined {
  if (!output) return undefined;
  if (output.terminal_event) {
    return { updated_at: now, terminal_event: output.terminal_event, last_status: statusOfTerminalEvent(output.terminal_event) };
  }
  const reconciled = output.reconciliation;
  if (reconciled?.http_status === 404) return { updated_at: now, evidence_lost: true };
  const status = reconciled?.status?.status;
  return typeof status === 'string' ? statusPatch({ status, updated_at: reconciled?.status?.updated_at }, now) : undefined;
}

/**
 * GET of the event stream, after `cursor` when there is one: as `?last_seq=` (upstream's branch, 0.22)
 * and as `Last-Event-ID` (the SSE way, which 0.22 prefers); a non-2xx answer is thrown as its failure.
 */
async function openStream(
  call: OperationCall<RunEventsInput>,
  path: string,
  headers: ReturnType<typeof buildHeaders>,
  scope: CallScope,
  cursor: number | undefined,
): Promise<ProviderResponse> {
  const { endpoint, config } = call;
  const request = cursor === undefined ? { path, headers } : { path: `${path}?last_seq=${cursor}`, headers: { ...headers, 'last-event-id': String(cursor) } };
  const response = await sendRequest(
    call.pools.targetFor(endpoint),
    { method: 'GET', ...request, headersTimeoutMs: SSE_HEADERS_TIMEOUT_MS, bodyTimeoutMs: config.limits.sseIdleTimeoutMs },
    scope,
  );
  call.onHttpStatus(response.statusCode);
  if (!isSuccess(response.statusCode)) throw await failureFromResponse(response, endpoint, config.now);
  return response;
}

/**
 * A stream cut before its terminal event, from a Hermes that numbers its events (`seq`, SSE `id:`),
 * is reopened after the last one read, at most MAX_RESUMPTIONS times and within the call's deadline
 * (the scope). A 404, or a resumed stream whose events turn out unnumbered, ends resuming: the run
 * is then reconciled through its status, as a stream without numbers is. (Events Hermes no longer keeps are in `events_lost`, and reading goes on.)
 */
async function resume(
  call: OperationCall<RunEventsInput>,
  path: string,
  headers: ReturnType<typeof buildHeaders>,
  reader: StreamReader,
  first: StreamEnd,
): Promise<StreamEnd> {
  const { output } = reader;
  let end = first;
  while (
    (end.kind === 'closed' || end.kind === 'broken') &&
    reader.lastSeq !== undefined &&
    output.resume_fallback === undefined &&
    (output.resumed ?? 0) < MAX_RESUMPTIONS
  ) {
    output.resumed = (output.resumed ?? 0) + 1;
    reader.resumedAfter = reader.lastSeq;
    let response: ProviderResponse;
    try {
      response = await openStream(call, path, headers, reader.scope, reader.lastSeq);
    } catch (error) {
      if (!(error instanceof HermesFailure && error.code === 'not_found')) throw error;
      output.resume_fallback = 'not_found';
      return end;
    }
    end = await readStream(call, response, reader);
  }
  return end;
}

async function readStream(call: OperationCall<RunEventsInput>, response: ProviderResponse, reader: StreamReader): Promise<StreamEnd> {
  const { output, scope } = reader;
  if (!isEventStreamContentType(response.headers['content-type'])) {
    response.body.destroy();
    throw new HermesFailure('invalid_response', `Hermes endpoint \`${call.endpoint.id}\` answered the event stream request with another content type`, {
      remoteStatus: response.statusCode,
    });
  }
  const { limits } = call.config;
  const secret = call.endpoint.apiKey?.reveal();
  const decoder = new SseDecoder({ maxFrameBytes: limits.maxSseFrameBytes, maxStreamBytes: limits.maxStreamResponseBytes }, call.endpoint.id, secret);
  const take = (items: SseItem[]) => takeAll(call, reader, items);
  try {
    // Leaving this loop early (return or throw) destroys the body and so closes the socket.
    for await (const chunk of response.body as AsyncIterable<Buffer>) {
      const end = await take(decoder.push(chunk));
      if (end !== undefined) return end;
      if (decoder.failure) throw decoder.failure;
    }
    return (await take(decoder.finish())) ?? CLOSED;
  } catch (error) {
    if (error instanceof HermesFailure || scope.cause !== undefined)
      throw transportFailure(error, scope, call.pools.targetFor(call.endpoint).peer, 'body', output.http_status);
    // The connection broke; the events held back for a possible key are still the run's events.
    return (await take(decoder.finish())) ?? { kind: 'broken', transportCode: transportErrorCode(error) };
  } finally {
    joinText(reader, secret);
  }
}
