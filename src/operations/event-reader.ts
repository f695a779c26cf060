/**
 * Reading a run's events, wherever they come from (Hermes' stream or the run journal): each event
 * recorded and published as a chunk in order, with the host's back-pressure, until the terminal
 * event or a limit, and the result settled from how reading ended.
 */
import type { CallScope } from '../transport/call-scope.js';
import { HermesFailure } from '../failures.js';
import { ERROR_CODE_PREFIX } from '../internal/package-info.js';
import { transportFailure } from '../transport/http.js';
import { TERMINAL_EVENTS } from '../contract/hermes-vocabulary.js';
import { schemaCatalog } from '../contract/schemas.js';
import { redactText } from '../internal/secret.js';
import { isSseDone, type SseItem } from '../transport/sse.js';
import type { EventsLostRange, HermesSseEvent, RunEventsOutput } from '../types.js';
import type { StreamTrace } from '../telemetry.js';
import type { OperationCall, OperationOutcome } from './operation.js';
import { runStatus } from './run-status.js';

export interface RunEventsInput {
  run_id: string;
  max_events?: number;
  /** With the run journal on: only the journal's events after this sequence (events are numbered from 1). */
  after_sequence?: number;
  /** Hermes' own `seq` of the last event the caller has: only later events are read (`?last_seq=`, `Last-Event-ID`). */
  last_seq?: number;
}

/** undici's idle-body timer, set to sseIdleTimeoutMs: the stream ended without saying how the run did. */
const IDLE_TIMEOUT_CODE = 'UND_ERR_BODY_TIMEOUT';

/** How reading ended; `broken` is a connection that failed mid-body, which is as incomplete as a clean close. */
export type StreamEnd = { kind: 'terminal' | 'truncated' | 'closed' } | { kind: 'broken'; transportCode: string | undefined };

/** A reader that starts after the caller's `last_seq` (a taken-over journal's follower passes its last Hermes `seq`), else at Hermes' first event. */
export function newReader(call: OperationCall<RunEventsInput>, output: RunEventsOutput, scope: CallScope, trace: StreamTrace): StreamReader {
  const cursor = call.input.last_seq;
  return {
    runId: call.input.run_id,
    onEventsLost: call.onEventsLost,
    publisher: call.publisher,
    output,
    text: [],
    scope,
    trace,
    maxEvents: call.input.max_events ?? call.config.limits.defaultMaxEvents,
    next: 0,
    published: undefined,
    endAfterPublished: undefined,
    lastSeq: cursor,
    resumedAfter: cursor,
  };
}

/** Records and publishes one read's items, waiting for each publication the host asks to be awaited; how the stream ended, if one of them ended it. */
export async function takeAll(call: OperationCall<RunEventsInput>, reader: StreamReader, items: SseItem[]): Promise<StreamEnd | undefined> {
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
export interface StreamReader {
  readonly runId: string;
  readonly onEventsLost: OperationCall<RunEventsInput>['onEventsLost'];
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
  /** The highest `seq` read so far (or the cursor read after), when Hermes numbers its events: where a resumption starts, and at or below which an event is a repeat. */
  lastSeq: number | undefined;
  /** When the read started after a cursor (the caller's, a takeover's or its own resumption's): the `seq` it started after. */
  resumedAfter: number | undefined;
}

export const CLOSED: StreamEnd = { kind: 'closed' };
const TERMINAL: StreamEnd = { kind: 'terminal' };
const TRUNCATED: StreamEnd = { kind: 'truncated' };

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
    if (item.event === 'replay.truncated') {
      noteLoss(item, reader);
      if (reader.published) return undefined;
      continue;
    }
    const seen = alreadyRead(item, reader);
    if (seen === 'unnumbered') {
      reader.output.resume_fallback = 'not_numbered';
      return CLOSED;
    }
    if (seen) continue;
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
 * Whether a read after a cursor (the caller's, or its own resumption's) meets an event it or its
 * caller has already: numbered at or below the highest number read; otherwise remembers the highest
 * number. A subscription from the start takes every event as it comes, numbered or not, as it always
 * did. A read after a cursor cannot tell a repeat from a new event without numbers: under the caller's
 * cursor it fails before publishing it; in its own resumption it stops there (`unnumbered`), and the
 * run is reconciled as a stream without numbers is.
 */
function alreadyRead(event: HermesSseEvent, reader: StreamReader): boolean | 'unnumbered' {
  const seq = seqOf(event);
  if (seq === undefined) {
    if (reader.resumedAfter === undefined) return false;
    if (reader.output.resumed === undefined) throw unnumbered(event, reader);
    return 'unnumbered';
  }
  const highest = reader.lastSeq ?? seq;
  if (reader.resumedAfter !== undefined && seq <= highest) return true;
  reader.lastSeq = Math.max(seq, highest);
  return false;
}

function unnumbered(event: HermesSseEvent, reader: StreamReader): HermesFailure {
  return new HermesFailure(
    'resume_unsupported',
    `Hermes endpoint \`${reader.output.endpoint_id}\` sent an event of run \`${reader.runId}\` (${event.event}) without a number (no \`seq\`, no SSE \`id:\`) ` +
      `to a read after seq ${reader.resumedAfter}: it does not number its events, so it cannot resume there, and the event was not published`,
    { effect: 'known', details: { last_seq: reader.resumedAfter } },
  );
}

/**
 * `replay.truncated`: Hermes no longer keeps every event after the reader's last one. The ones it
 * lost (from the next number up to the oldest kept) are recorded; the kept ones follow and are read.
 */
function noteLoss(marker: HermesSseEvent, reader: StreamReader): void {
  const from = reader.lastSeq === undefined ? 0 : reader.lastSeq + 1;
  const oldest = marker.data['oldest_retained_seq'] ?? marker.data['oldest_seq'];
  const known = typeof oldest === 'number' && Number.isSafeInteger(oldest);
  if (known && oldest <= from) return;
  const lost: EventsLostRange = { from_seq: from, to_seq: known ? oldest - 1 : null, after_events: reader.output.events.length, reason: 'replay_truncated' };
  reader.output.events_lost = [...(reader.output.events_lost ?? []), lost];
  // Awaited like a publication, so that a journal records the gap before the events after it.
  reader.published = reader.onEventsLost?.(lost);
}

const SSE_ID_NUMBER = /^\d{1,15}$/;

/** An event's number: its `seq` field, else a numeric SSE `id:`. */
export function seqOf(event: HermesSseEvent): number | undefined {
  const { seq } = event.data;
  if (typeof seq === 'number' && Number.isSafeInteger(seq) && seq >= 0) return seq;
  return event.id !== undefined && SSE_ID_NUMBER.test(event.id) ? Number(event.id) : undefined;
}

/**
 * The result's text from the events read so far. Each event is redacted already; a key split across
 * deltas only appears once they are joined.
 */
export function joinText(reader: StreamReader, secret: string | undefined): void {
  const joined = reader.text.join('');
  reader.output.text = secret === undefined ? joined : redactText(joined, secret);
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

export async function settle(call: OperationCall<RunEventsInput>, output: RunEventsOutput, end: StreamEnd): Promise<OperationOutcome> {
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
  const lost = output.events_lost === undefined ? '' : ` (Hermes' replay no longer reached back: replay.truncated, see events_lost)`;
  if (output.resume_fallback === 'not_found') return `${resumed}${lost} (Hermes answered 404 to the resumption)`;
  if (output.resume_fallback === 'not_numbered') return `${resumed}${lost} (the resumed stream sent an event without a number)`;
  return resumed + lost;
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
