/**
 * run_events from the run journal (#26): the events the connector's follower stored, read by any
 * number of callers on any replica sharing the ledger, then followed live until the terminal event.
 */
import { CallScope } from '../transport/call-scope.js';
import { HermesFailure } from '../failures.js';
import { transportFailure } from '../transport/http.js';
import type { RunEventsOutput } from '../types.js';
import { endSpan, errorTypeOf, StreamTrace } from '../telemetry.js';
import type { JournalKey, JournalRecord } from '../journal/types.js';
import type { JournalReading, OperationCall, OperationOutcome } from './operation.js';
import { CLOSED, joinText, newReader, type RunEventsInput, settle, type StreamEnd, type StreamReader, takeAll } from './event-reader.js';

/** Journal events read per query. */
const JOURNAL_PAGE = 256;

/**
 * run_events from the run journal: every event from the first (or after `after_sequence`), then
 * the journal's appends as they are committed, until the terminal event, the call's limits or the
 * journal's close; the same result, chunks and back-pressure as from Hermes. Undefined when the
 * run has no journal of this tenant's (it was not started through a journaling connector).
 */
export async function readJournal(call: OperationCall<RunEventsInput>, journal: JournalReading): Promise<OperationOutcome | undefined> {
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
    joinText(reader, endpoint.apiKey?.reveal());
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
