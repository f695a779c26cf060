import type { AipStreamChunk, RunEventsOutput } from '../../index.js';
import { duration } from '../format.js';
import { describeResult, resultEvidence } from './session.js';
import { CheckFailed, type Check } from './types.js';
import { TERMINAL_EVENTS } from '../../contract/hermes-vocabulary.js';

const TERMINAL_LIST = [...TERMINAL_EVENTS].join(', ');

/** (3) The single event consumer of a run sees ordered frames and a terminal event. */
export const orderedEvents: Check = {
  id: 'ordered_events',
  title: 'the single event consumer observes ordered frames and a terminal condition',
  async run(session, evidence) {
    const { runId } = await session.startRun('harmless');
    evidence['run_id'] = runId;
    const chunks: AipStreamChunk[] = [];
    const result = await session.invoke('run_events', { run_id: runId }, { onChunk: (chunk) => void chunks.push(chunk) });
    const run = session.runs.get(runId);
    if (run) run.stream = 'read';
    const output = result.output as RunEventsOutput | undefined;
    const events = output?.events ?? [];
    evidence['result'] = resultEvidence(result);
    evidence['event_names'] = events.map((event) => event.event);
    evidence['chunks'] = chunks.map((chunk) => `${chunk.sequence}:${chunk.kind}`);
    if (!output) throw new CheckFailed(`run_events of ${runId} returned no stream: ${describeResult(result)}`);

    const sequences = chunks.map((chunk) => chunk.sequence);
    if (sequences.some((sequence, index) => sequence !== index))
      throw new CheckFailed(`stream chunks arrived out of order or with gaps: sequences ${sequences.join(', ')}`);
    const finals = chunks.filter((chunk) => chunk.kind === 'done' || chunk.kind === 'error');
    if (finals.length !== 1 || chunks[chunks.length - 1] !== finals[0]) {
      throw new CheckFailed(`expected exactly one final chunk (done or error), last; got ${finals.length}`);
    }
    for (const [index, event] of events.entries()) {
      const eventRunId = event.data['run_id'];
      if (eventRunId !== undefined && eventRunId !== runId)
        throw new CheckFailed(`event ${index} (${event.event}) belongs to run ${String(eventRunId)}, not ${runId}`);
    }
    const late = events.findIndex((event, index) => {
      const [before, now] = [timestampOf(events[index - 1]?.data), timestampOf(event.data)];
      return before !== undefined && now !== undefined && now < before;
    });
    if (late > 0) throw new CheckFailed(`event ${late} (${events[late]?.event}) carries an earlier timestamp than the event before it`);

    if (!output.terminal) {
      const count = `${events.length} event${events.length === 1 ? '' : 's'}${events.length > 0 ? ` (last: ${events[events.length - 1]?.event})` : ''}`;
      const code = result.error?.code ?? '';
      if (code.endsWith('.deadline_exceeded') || code.endsWith('.cancelled')) {
        throw new CheckFailed(
          `no terminal event (${TERMINAL_LIST}) arrived within ${duration(session.settings.stepTimeoutMs)}: the stream stayed open after ${count}`,
        );
      }
      if (output.truncated) throw new CheckFailed(`the stream was truncated after ${count} without a terminal event (${TERMINAL_LIST})`);
      const reconciled = output.reconciliation?.status?.['status'];
      throw new CheckFailed(
        `the stream ended without a terminal event (${TERMINAL_LIST}) after ${count}: ${describeResult(result)}${reconciled ? `; status read afterwards: ${String(reconciled)}` : ''}`,
      );
    }
    evidence['terminal_event'] = output.terminal_event;
    const last = events[events.length - 1]?.event;
    if (!output.terminal_event || !TERMINAL_EVENTS.has(output.terminal_event) || last !== output.terminal_event) {
      throw new CheckFailed(`the stream's terminal event ${String(output.terminal_event)} is not its last event (${String(last)})`);
    }
  },
};

/** Hermes stamps every event with float epoch seconds; events without one do not constrain the order. */
function timestampOf(data: Record<string, unknown> | undefined): number | undefined {
  const value = data?.['timestamp'];
  return typeof value === 'number' ? value : undefined;
}
