import { CallScope } from '../transport/call-scope.js';
import { HermesFailure } from '../failures.js';
import { ERROR_CODE_PREFIX } from '../internal/package-info.js';
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
import { statusOfTerminalEvent, TERMINAL_EVENTS } from '../contract/hermes-vocabulary.js';
import type { RunEvidencePatch } from '../ledger/types.js';
import { schemaCatalog } from '../contract/schemas.js';
import { redactText } from '../internal/secret.js';
import { SseDecoder, isSseDone, type SseItem } from '../transport/sse.js';
import type { HermesSseEvent, RunEventsOutput } from '../types.js';
import { endRequestSpan, endSpan, errorTypeOf, StreamTrace } from '../telemetry.js';
import { checkRunId, runRoute, type Operation, type OperationCall, type OperationOutcome } from './operation.js';
import { runStatus } from './run-status.js';
import type { JournalKey, JournalRecord } from '../journal/types.js';
import type { JournalReading } from './operation.js';

export interface RunEventsInput {
  run_id: string;
  max_events?: number;
  /** With the run journal on: only the journal's events after this sequence (events are numbered from 1). */
  after_sequence?: number;
}

/** Hermes looks for the run's stream for about a second before it answers; anything past this is a dead peer. */
const SSE_HEADERS_TIMEOUT_MS = 30_000;

/** undici's idle-body timer, set to sseIdleTimeoutMs: the stream ended without saying how the run did. */
const IDLE_TIMEOUT_CODE = 'UND_ERR_BODY_TIMEOUT';

/**
 * How reading ended; `broken` is a connection that failed mid-body, which is as incomplete as a
 * clean close; `replay_truncated` is a resumption whose replay no longer reaches back.
 */
type StreamEnd = { kind: 'terminal' | 'truncated' | 'closed' | 'replay_truncated' } | { kind: 'broken'; transportCode: string | undefined };

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
      const response = await openStream(call, resumablePath(route.path, reader), headers, scope);
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
  return typeof status === 'string' ? { updated_at: now, last_status: status } : undefined;
}

/** GET of the event stream (`path` may carry `?last_seq=`); a non-2xx answer is thrown as its failure. */
async function openStream(
  call: OperationCall<RunEventsInput>,
  path: string,
  headers: ReturnType<typeof buildHeaders>,
  scope: CallScope,
): Promise<ProviderResponse> {
  const { endpoint, config } = call;
  const response = await sendRequest(
    call.pools.targetFor(endpoint),
    { method: 'GET', path, headers, headersTimeoutMs: SSE_HEADERS_TIMEOUT_MS, bodyTimeoutMs: config.limits.sseIdleTimeoutMs },
    scope,
  );
  call.onHttpStatus(response.statusCode);
  if (!isSuccess(response.statusCode)) throw await failureFromResponse(response, endpoint, config.now);
  return response;
}

/**
 * A stream cut before its terminal event, from a Hermes that numbers its events (`seq`, SSE `id:`),
 * is reopened with `?last_seq=<last seen>`, at most MAX_RESUMPTIONS times and within the call's
 * deadline (the scope). `replay.truncated` or a 404 ends resuming: the run is then reconciled
 * through its status, as a stream without numbers is.
 */
async function resume(
  call: OperationCall<RunEventsInput>,
  path: string,
  headers: ReturnType<typeof buildHeaders>,
  reader: StreamReader,
  first: StreamEnd,
): Promise<StreamEnd> {
  const { output } = reader;
  if (first.kind === 'replay_truncated') {
    output.resume_fallback = 'replay_truncated';
    return CLOSED;
  }
  let end = first;
  while ((end.kind === 'closed' || end.kind === 'broken') && reader.lastSeq !== undefined && (output.resumed ?? 0) < MAX_RESUMPTIONS) {
    output.resumed = (output.resumed ?? 0) + 1;
    reader.resumedAfter = reader.lastSeq;
    let response: ProviderResponse;
    try {
      response = await openStream(call, `${path}?last_seq=${reader.lastSeq}`, headers, reader.scope);
    } catch (error) {
      if (!(error instanceof HermesFailure && error.code === 'not_found')) throw error;
      output.resume_fallback = 'not_found';
      return end;
    }
    end = await readStream(call, response, reader);
    if (end.kind === 'replay_truncated') {
      output.resume_fallback = 'replay_truncated';
      return CLOSED;
    }
  }
  return end;
}

/** The stream's path, with `?last_seq=` when the call resumes a stream another reader started (a journal taken over). */
function resumablePath(path: string, reader: StreamReader): string {
  return reader.resumedAfter === undefined ? path : `${path}?last_seq=${reader.resumedAfter}`;
}

function newReader(call: OperationCall<RunEventsInput>, output: RunEventsOutput, scope: CallScope, trace: StreamTrace): StreamReader {
  return {
    publisher: call.publisher,
    output,
    text: [],
    scope,
    trace,
    maxEvents: call.input.max_events ?? call.config.limits.defaultMaxEvents,
    next: 0,
    published: undefined,
    endAfterPublished: undefined,
    lastSeq: call.resumeAfterSeq,
    resumedAfter: call.resumeAfterSeq,
  };
}

async function readStream(call: OperationCall<RunEventsInput>, response: ProviderResponse, reader: StreamReader): Promise<StreamEnd> {
  const { output, scope, text } = reader;
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
    // Each event is redacted already; a key split across deltas only appears once they are joined.
    const joined = text.join('');
    output.text = secret === undefined ? joined : redactText(joined, secret);
  }
}

/** Records and publishes one read's items, waiting for each publication the host asks to be awaited; how the stream ended, if one of them ended it. */
async function takeAll(call: OperationCall<RunEventsInput>, reader: StreamReader, items: SseItem[]): Promise<StreamEnd | undefined> {
  reader.next = 0;
  for (;;) {
    const end = takeItems(items, reader);
    if (end !== undefined || reader.published === undefined) return end;
    const published = reader.published;
    reader.published = undefined;
    await untilPublished(published, call, reader.scope, reader.output.http_status);
    if (reader.endAfterPublished) return reader.endAfterPublished;
  }
}

/** What the per-event loop needs, kept apart from the async reader so that the loop is a small synchronous function. */
interface StreamReader {
  readonly publisher: OperationCall<RunEventsInput>['publisher'];
  readonly output: RunEventsOutput;
  readonly text: string[];
  readonly scope: CallScope;
  readonly trace: StreamTrace;
  readonly maxEvents: number;
  /** The next item of the current read to take. */
  next: number;
  /** A publication the reader must wait for before taking item `next`. */
  published: Promise<void> | undefined;
  /** How the stream ends once that publication is done, when the published event ended it. */
  endAfterPublished: StreamEnd | undefined;
  /** The highest `seq` read so far, when Hermes numbers its events: where a resumption starts. */
  lastSeq: number | undefined;
  /** During a resumption, the `seq` it started after: a replayed event at or below it was read already. */
  resumedAfter: number | undefined;
}

const CLOSED: StreamEnd = { kind: 'closed' };
const TERMINAL: StreamEnd = { kind: 'terminal' };
const TRUNCATED: StreamEnd = { kind: 'truncated' };
const REPLAY_TRUNCATED: StreamEnd = { kind: 'replay_truncated' };

/**
 * Takes the items of one read from `reader.next` on: records and publishes each. Returns how the
 * stream ended, if it did; otherwise stops after an item whose publication must be awaited
 * (`reader.published`), or at the end of the items.
 */
function takeItems(items: SseItem[], reader: StreamReader): StreamEnd | undefined {
  const { output, scope } = reader;
  while (reader.next < items.length) {
    const item = items[reader.next++] as SseItem;
    // One network read can carry many frames: an abort (say, from onChunk) stops between them.
    if (scope.aborted) throw scope.reason;
    if (isSseDone(item)) return CLOSED;
    if (item.event === 'replay.truncated') return REPLAY_TRUNCATED;
    if (alreadyRead(item, reader)) continue;
    const terminal = TERMINAL_EVENTS.has(item.event);
    record(output, item, reader.text, terminal);
    if (reader.trace.recording) reader.trace.event(item.event, output.events.length, terminal);
    const published = reader.publisher.publishEvent(item, terminal);
    // A publication to wait for comes before the end checks, as the reader awaited it in place.
    if (published) {
      reader.published = published;
      if (terminal) reader.endAfterPublished = TERMINAL;
      else if (output.events.length >= reader.maxEvents) reader.endAfterPublished = TRUNCATED;
      return undefined;
    }
    if (terminal) return TERMINAL;
    if (output.events.length >= reader.maxEvents) return TRUNCATED;
  }
  return undefined;
}

/**
 * Whether a resumption's replay repeats an event read before it; otherwise remembers the highest
 * number. The first subscription takes every event as it comes, numbered or not, as it always did.
 */
function alreadyRead(event: HermesSseEvent, reader: StreamReader): boolean {
  const seq = seqOf(event);
  if (seq === undefined) return false;
  if (reader.resumedAfter !== undefined && seq <= reader.resumedAfter) return true;
  reader.lastSeq = Math.max(seq, reader.lastSeq ?? seq);
  return false;
}

/** An event's number: its `seq` field, else a numeric SSE `id:`. */
export function seqOf(event: HermesSseEvent): number | undefined {
  const { seq } = event.data;
  if (typeof seq === 'number' && Number.isSafeInteger(seq) && seq >= 0) return seq;
  return event.id !== undefined && /^\d{1,15}$/.test(event.id) ? Number(event.id) : undefined;
}

/** Records an event as soon as it is read, so that a result cut short later still shows it (and the run's end, if it was seen). */
function record(output: RunEventsOutput, event: HermesSseEvent, text: string[], terminal: boolean): void {
  output.events.push(event);
  const streamed = streamedText(event);
  if (streamed !== undefined) text.push(streamed);
  if (terminal) {
    output.terminal = true;
    output.terminal_event = event.event;
  }
}

/**
 * The assistant text an event adds: a `message.delta`'s delta, or a later Hermes' `message.interim`
 * text unless `already_streamed` says its deltas carried it already.
 */
function streamedText(event: HermesSseEvent): string | undefined {
  const { data } = event;
  if (event.event === 'message.delta') return typeof data.delta === 'string' ? data.delta : undefined;
  if (event.event === 'message.interim' && data.already_streamed === false) return typeof data.text === 'string' ? data.text : undefined;
  return undefined;
}

/**
 * Waits for the host's onChunk, but no longer than the call may last: a host that never returns
 * ends the call as its deadline, cancellation or the connector's close would, and the failure
 * names the chunk it was given.
 */
async function untilPublished(published: Promise<void>, call: OperationCall<RunEventsInput>, scope: CallScope, remoteStatus: number): Promise<void> {
  const sequence = call.publisher.sent - 1;
  try {
    await scope.race(published);
  } catch (error) {
    if (error !== scope.reason) throw error;
    const ended = transportFailure(error, scope, call.pools.targetFor(call.endpoint).peer, 'body', remoteStatus);
    throw new HermesFailure(ended.code, `${ended.message}, while the host's stream publisher (onChunk) had not returned chunk ${sequence}`, {
      effect: ended.effect,
      remoteStatus,
      details: { ...ended.details, stalled_chunk_sequence: sequence },
    });
  }
}

async function settle(call: OperationCall<RunEventsInput>, output: RunEventsOutput, end: StreamEnd): Promise<OperationOutcome> {
  const runId = call.input.run_id;
  const message = output.text === '' ? undefined : [{ type: 'text' as const, text: output.text }];
  if (end.kind === 'terminal') {
    if (output.terminal_event === 'run.completed') return { status: 'completed', output, message };
    if (output.terminal_event === 'run.cancelled') return { status: 'cancelled', output, message };
    if (output.terminal_event === 'run.interrupted') {
      const interrupted = `Hermes run \`${runId}\` was interrupted (run.interrupted: its gateway shut down or restarted before the run settled); it may have acted before it was interrupted`;
      return { status: 'failed', output, message, failure: new HermesFailure('run_interrupted', interrupted, { effect: 'known' }) };
    }
    return {
      status: 'failed',
      output,
      message,
      failure: new HermesFailure('stream_failed', `Hermes run \`${runId}\` failed (run.failed)`, { effect: 'known' }),
    };
  }
  if (end.kind === 'truncated') {
    output.truncated = true;
    const failure = new HermesFailure(
      'stream_truncated',
      `Stopped reading run \`${runId}\` after max_events (${output.events.length}) events without a terminal event; later events are lost to this reader`,
      { effect: 'known' },
    );
    return { status: 'failed', output, message, failure };
  }
  output.reconciliation = await reconcile(call);
  const how = howItEnded(end, call.config.limits.sseIdleTimeoutMs);
  const failure = new HermesFailure(
    'stream_incomplete',
    `The event stream of run \`${runId}\` ${how} without a terminal event${resumptionText(output)}; its status was read for reconciliation`,
    { effect: 'known', details: end.kind === 'broken' && end.transportCode ? { transport_code: end.transportCode } : undefined },
  );
  return { status: 'failed', output, message, failure };
}

/** What resuming did before the reconciliation, for the failure message; empty for a stream without numbered events. */
function resumptionText(output: RunEventsOutput): string {
  const resumed = output.resumed === undefined ? '' : ` after ${output.resumed} resumption${output.resumed === 1 ? '' : 's'} with ?last_seq=`;
  if (output.resume_fallback === 'replay_truncated') return `${resumed} (Hermes' replay no longer reached back: replay.truncated)`;
  if (output.resume_fallback === 'not_found') return `${resumed} (Hermes answered 404 to the resumption)`;
  return resumed;
}

function howItEnded(end: StreamEnd, idleTimeoutMs: number): string {
  if (end.kind !== 'broken') return 'closed';
  if (end.transportCode === IDLE_TIMEOUT_CODE) return `was silent for longer than sseIdleTimeoutMs (${idleTimeoutMs} ms)`;
  return `broke${end.transportCode ? ` (${end.transportCode})` : ''}`;
}

/** One status read after an incomplete stream; its failure is recorded, never thrown. */
async function reconcile(call: OperationCall<RunEventsInput>): Promise<NonNullable<RunEventsOutput['reconciliation']>> {
  let httpStatus: number | null = null;
  const statusCall = {
    ...call,
    action: { ...call.action, idempotency_key: undefined },
    input: { run_id: call.input.run_id },
    declaration: schemaCatalog().operations.run_status.declaration,
    onHttpStatus: (status: number) => {
      httpStatus = status;
    },
  };
  try {
    const { output } = await runStatus.execute(statusCall);
    const validate = schemaCatalog().operations.run_status.validateOutput;
    if (!validate(output)) return { http_status: httpStatus, error_code: `${ERROR_CODE_PREFIX}invalid_response` };
    return { http_status: httpStatus, status: output as Record<string, unknown> };
  } catch (error) {
    const code = error instanceof HermesFailure ? error.code : 'internal';
    return { http_status: httpStatus, error_code: ERROR_CODE_PREFIX + code };
  }
}

/** Journal events read per query. */
const JOURNAL_PAGE = 256;

/**
 * run_events from the run journal: every event from the first (or after `after_sequence`), then
 * the journal's appends as they are committed, until the terminal event, the call's limits or the
 * journal's close; the same result, chunks and back-pressure as from Hermes. Undefined when the
 * run has no journal of this tenant's (it was not started through a journaling connector).
 */
async function readJournal(call: OperationCall<RunEventsInput>, journal: JournalReading): Promise<OperationOutcome | undefined> {
  const { endpoint } = call;
  const key: JournalKey = { tenant_id: call.context.tenantId ?? null, endpoint_id: endpoint.id, run_id: call.input.run_id };
  const first = await journalLedgerRead(() => journal.store.journal(key));
  if (!first) {
    if (await journalLedgerRead(() => journal.store.journaledForAnotherTenant(key))) {
      throw new HermesFailure('not_found', `Run \`${key.run_id}\` is not one of this tenant's journaled runs`, { effect: 'none' });
    }
    return undefined;
  }
  const output: RunEventsOutput = { endpoint_id: endpoint.id, operation: 'run_events', http_status: 200, events: [], text: '', terminal: false };
  const scope = new CallScope({ signal: call.context.signal, openCalls: call.openCalls, deadline: call.deadline, timeoutMs: undefined, now: call.config.now });
  const span = call.telemetry.startInternal('aip.journal read', call.traceContext);
  const trace = new StreamTrace(call.telemetry, span);
  const reader = newReader(call, output, scope, trace);
  const tail = new JournalTailing(journal, key, scope);
  let end: StreamEnd;
  let last: JournalRecord = first;
  try {
    ({ end, last } = await tailJournal(call, reader, tail, call.input.after_sequence ?? 0));
  } catch (error) {
    const failure = error instanceof HermesFailure ? error : transportFailure(error, scope, call.pools.targetFor(endpoint).peer, 'body', 200);
    trace.finish(output.events);
    endSpan(span, errorTypeOf(failure));
    return { status: failure.code === 'cancelled' ? 'cancelled' : 'failed', output, failure };
  } finally {
    tail.stop();
    scope.dispose();
    const secret = endpoint.apiKey?.reveal();
    output.text = secret === undefined ? reader.text.join('') : redactText(reader.text.join(''), secret);
  }
  trace.finish(output.events);
  endSpan(span, undefined);
  output.journal = journalSummary(last, output.terminal_event);
  return settle(call, output, end);
}

/**
 * The journal's state as the result reports it. A reader that got the terminal event reports the
 * journal complete: its follower closes it so right after the append the reader may have been quicker than.
 */
function journalSummary(record: JournalRecord, terminalEvent: string | undefined): NonNullable<RunEventsOutput['journal']> {
  const summary: NonNullable<RunEventsOutput['journal']> = { state: record.state, last_sequence: record.next_sequence - 1 };
  if (record.events_lost.length > 0) summary.events_lost = record.events_lost;
  if (record.close_reason !== null) summary.close_reason = record.close_reason;
  if (terminalEvent !== undefined) Object.assign(summary, { state: 'complete', close_reason: terminalEvent });
  return summary;
}

/** Reads and publishes the journal's events after `after` until one ends the stream, or the journal is closed with none left. */
async function tailJournal(
  call: OperationCall<RunEventsInput>,
  reader: StreamReader,
  tail: JournalTailing,
  after: number,
): Promise<{ end: StreamEnd; last: JournalRecord }> {
  let read = after;
  for (;;) {
    tail.changed = false;
    const entries = await tail.read((store, key) => store.events(key, read, JOURNAL_PAGE));
    if (entries.length > 0) {
      read = (entries[entries.length - 1] as { sequence: number }).sequence;
      const end = await takeAll(
        call,
        reader,
        entries.map((entry) => entry.event),
      );
      if (end !== undefined) return { end, last: await tail.record() };
      continue;
    }
    const record = await tail.record();
    if (record.state !== 'following') {
      // Appended and closed between the two reads: the appends are read first.
      if (record.next_sequence - 1 > read) continue;
      return { end: CLOSED, last: record };
    }
    await tail.untilChanged();
  }
}

/** A ledger read of the journal; a failing ledger is `ledger_unavailable` (the call sent nothing to Hermes). */
async function journalLedgerRead<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch {
    throw new HermesFailure('ledger_unavailable', 'The run ledger could not be reached to read the run journal', { effect: 'none' });
  }
}

/**
 * A subscription to one journal's changes. Waiting ends on a change, the call's end, or a slow safety
 * timer: a notification lost while the listener reconnects can delay a reader, never strand it.
 */
class JournalTailing {
  changed = false;
  readonly #journal: JournalReading;
  readonly #key: JournalKey;
  readonly #scope: CallScope;
  readonly #unsubscribe: () => void;
  #wake: (() => void) | undefined;

  constructor(journal: JournalReading, key: JournalKey, scope: CallScope) {
    this.#journal = journal;
    this.#key = key;
    this.#scope = scope;
    this.#unsubscribe = journal.store.subscribe(key, () => {
      this.changed = true;
      this.#wake?.();
    });
  }

  read<T>(work: (store: JournalReading['store'], key: JournalKey) => Promise<T>): Promise<T> {
    return this.#scope.race(journalLedgerRead(() => work(this.#journal.store, this.#key)));
  }

  async record(): Promise<JournalRecord> {
    const record = await this.read((store, key) => store.journal(key));
    if (!record) throw new HermesFailure('stream_incomplete', `The journal of run \`${this.#key.run_id}\` was purged while it was read`, { effect: 'known' });
    return record;
  }

  async untilChanged(): Promise<void> {
    if (this.changed) return;
    let timer: NodeJS.Timeout | undefined;
    try {
      await this.#scope.race(
        new Promise<void>((resolve) => {
          this.#wake = resolve;
          timer = setTimeout(resolve, this.#journal.safetyRereadMs);
        }),
      );
    } finally {
      clearTimeout(timer);
      this.#wake = undefined;
    }
  }

  stop(): void {
    this.#unsubscribe();
  }
}
