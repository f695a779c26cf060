import type { HermesSseEvent, RunEventsOutput } from '../../index.js';
import { describeResult, pause, resultEvidence, type EndpointSession } from './session.js';
import { CheckFailed, type Check, type CheckEvidence } from './types.js';
import { errorCode } from '../../failures.js';
import { eventKey, reconnectRule, resumptionProblem } from './resumption.js';

const NOT_FOUND = errorCode('not_found');
/** Lets Hermes notice the closed subscriber (and drop the run's queue) before the second subscription. */
const SETTLE_MS = 250;
/** One second subscription waits at most this long before it is given up and tried again. */
const ATTEMPT_MS = 5_000;
/** How long a resumed read of the still-active run is followed: the events missed by then are judged. */
const RESUME_MS = 2_000;

/**
 * (7) A stream cut by its consumer after the first chunk: the connector must not report it as
 * complete; where the endpoint numbers its events, a reconnect after the last one delivers exactly
 * the missed events, else a second subscription gets not_found and repeats nothing; run_status reconciles.
 */
export const disconnectReconciled: Check = {
  id: 'disconnect_reconciled',
  title: 'a disconnected stream is resumed exactly where Hermes replays, else reconciled through status without claiming replay',
  async run(session, evidence) {
    const { runId } = await session.startRun('long');
    evidence['run_id'] = runId;
    const cut = new AbortController();
    const kinds: string[] = [];
    const first = await session.invoke(
      'run_events',
      { run_id: runId },
      {
        signal: cut.signal,
        onChunk: (chunk) => {
          kinds.push(chunk.kind);
          cut.abort();
        },
      },
    );
    const run = session.runs.get(runId);
    if (run) run.stream = 'disconnected';
    const firstOutput = first.output as RunEventsOutput | undefined;
    evidence['cut_stream'] = {
      ...resultEvidence(first),
      chunk_kinds: kinds,
      event_names: firstOutput?.events.map((event) => event.event) ?? [],
      terminal: firstOutput?.terminal ?? false,
    };
    if (kinds[0] === undefined) throw new CheckFailed(`the event stream of run ${runId} delivered no chunk to cut: ${describeResult(first)}`);
    if (kinds[0] === 'done' || kinds[0] === 'error') {
      throw new CheckFailed(
        `the event stream of run ${runId} ended at its first chunk (${describeResult(first)}); this check needs a run that is still active`,
      );
    }
    if (first.status === 'completed' || firstOutput?.terminal === true) {
      throw new CheckFailed(
        `the connector reported the stream of run ${runId} as ${first.status} (terminal ${String(firstOutput?.terminal)}) although its consumer cut it after the first chunk`,
      );
    }

    const delivered = firstOutput?.events ?? [];
    const { cursor, ...rule } = reconnectRule(delivered);
    if (session.settings.journal) {
      evidence['rule'] = { applied: 'journal', why: 'the connector keeps a run event journal: the consumer resumes in it with after_sequence' };
      await resumeFromJournal(session, runId, delivered, evidence);
    } else {
      evidence['rule'] = rule;
      if (cursor === undefined) await resubscribe(session, runId, delivered, evidence);
      else await resumeAfter(session, runId, delivered, cursor, evidence);
    }

    const status = await session.readStatus(runId);
    evidence['reconciled_status'] = { run_id: status['run_id'], status: status['status'], last_event: status['last_event'] ?? null };
    if (status['run_id'] !== runId) throw new CheckFailed(`run_status of ${runId} answered for run ${String(status['run_id'])}`);
    evidence['interpretation'] = interpretation(session.settings.journal === true, cursor);
  },
};

function interpretation(journal: boolean, cursor: number | undefined): string {
  if (journal) return "the connector's run journal kept the events: the consumer resumed after those it had, and a reader from the first gets them again";
  if (cursor !== undefined) return `Hermes numbers and replays its events: the consumer resumed after seq ${cursor} and got the events it missed, each once`;
  return 'events after the cut are lost to this consumer; the run itself is known only through run_status';
}

/**
 * Where Hermes numbers its events, the consumer reconnects with the last `seq` it got (`last_seq`):
 * within the attempt's time it must get the events after it, contiguous, none it had, none twice,
 * a gap only where `events_lost` names it, and no claim of completion without the terminal event.
 */
async function resumeAfter(session: EndpointSession, runId: string, delivered: HermesSseEvent[], cursor: number, evidence: CheckEvidence): Promise<void> {
  const resumed = await session.invoke('run_events', { run_id: runId, last_seq: cursor }, { deadline: Math.min(session.deadline, Date.now() + RESUME_MS) });
  const output = resumed.output as RunEventsOutput | undefined;
  const events = output?.events ?? [];
  evidence['resumed'] = {
    ...resultEvidence(resumed),
    last_seq: cursor,
    event_names: events.map((event) => event.event),
    seqs: events.map((event) => event.data['seq'] ?? event.id ?? null),
    events_lost: output?.events_lost ?? [],
  };
  if (!output) throw new CheckFailed(`resuming run ${runId} after seq ${cursor} read no stream: ${describeResult(resumed)}`);
  if (resumed.status === 'completed' && output.terminal !== true)
    throw new CheckFailed(`resuming run ${runId} was reported completed without a terminal event`);
  const problem = resumptionProblem(cursor, delivered, output);
  if (problem !== undefined) throw new CheckFailed(`resuming run ${runId} after seq ${cursor}: ${problem}`);
}

/**
 * With the run journal on, Hermes is not subscribed to again: the consumer resumes after the events
 * it got (`after_sequence`) and must get none of them twice nor a claim of completion without the
 * terminal event, and a reader from the first event must get exactly the events the cut stream delivered.
 */
async function resumeFromJournal(session: EndpointSession, runId: string, delivered: HermesSseEvent[], evidence: CheckEvidence): Promise<void> {
  const attemptDeadline = () => ({ deadline: Math.min(session.deadline, Date.now() + ATTEMPT_MS) });
  const resumed = await session.invoke('run_events', { run_id: runId, after_sequence: delivered.length }, attemptDeadline());
  const resumedOutput = resumed.output as RunEventsOutput | undefined;
  const events = resumedOutput?.events ?? [];
  evidence['resumed'] = { ...resultEvidence(resumed), after_sequence: delivered.length, event_names: events.map((event) => event.event) };
  const seen = new Set(delivered.map(eventKey));
  const repeated = events.filter((event) => seen.has(eventKey(event)));
  if (repeated.length > 0)
    throw new CheckFailed(`resuming run ${runId} after ${delivered.length} event(s) repeated ${repeated.length} of them (${repeated[0]?.event})`);
  if (resumed.status === 'completed' && resumedOutput?.terminal !== true) {
    throw new CheckFailed(`resuming run ${runId} was reported completed without a terminal event`);
  }
  const again = await session.invoke('run_events', { run_id: runId, max_events: delivered.length }, attemptDeadline());
  const replayed = (again.output as RunEventsOutput | undefined)?.events ?? [];
  evidence['read_from_first'] = { ...resultEvidence(again), event_names: replayed.map((event) => event.event) };
  if (replayed.map(eventKey).join() !== delivered.map(eventKey).join()) {
    throw new CheckFailed(`a reader of run ${runId} from the first event did not get the ${delivered.length} event(s) the cut stream delivered`);
  }
}

/**
 * Subscribes again until Hermes answers not_found. Hermes may notice the cut only at its next write
 * (an event or the 30 s keepalive), and a subscription in that window shares the live queue: it
 * is tried again, but it must never receive an event the cut stream already delivered.
 */
async function resubscribe(session: EndpointSession, runId: string, delivered: HermesSseEvent[], evidence: CheckEvidence): Promise<void> {
  const seen = new Set(delivered.map(eventKey));
  const attempts: Array<Record<string, unknown>> = [];
  evidence['resubscriptions'] = attempts;
  for (;;) {
    await pause(SETTLE_MS, session.settings.signal);
    const result = await session.invoke('run_events', { run_id: runId }, { deadline: Math.min(session.deadline, Date.now() + ATTEMPT_MS) });
    const events = (result.output as RunEventsOutput | undefined)?.events ?? [];
    attempts.push({ ...resultEvidence(result), event_names: events.map((event) => event.event) });
    if (result.receipt?.['replayed'] === true) throw new CheckFailed(`the connector claimed a replay for a second subscription to run ${runId}`);
    const replayed = events.filter((event) => seen.has(eventKey(event)));
    if (replayed.length > 0) {
      throw new CheckFailed(
        `a second subscription to run ${runId} received ${replayed.length} event(s) the cut stream had already delivered (${replayed[0]?.event}): the stream was replayed`,
      );
    }
    if (result.error?.code === NOT_FOUND) return;
    if (session.settings.signal.aborted) throw new CheckFailed(`interrupted while subscribing again to run ${runId}`);
    if (Date.now() + SETTLE_MS >= session.deadline) {
      throw new CheckFailed(
        `a second subscription to run ${runId} after the disconnect was answered ${describeResult(result)}, not ${NOT_FOUND}, until the deadline`,
      );
    }
  }
}
