/**
 * How qualification check 7 and the conformance kit's `restart_reconnect` judge a reconnect. Hermes
 * declares nothing about replay in GET /v1/capabilities (0.22); what an endpoint declares is its
 * stream: events numbered with SSE `id:` lines and a `seq` field are the SSE way of saying "resume
 * after `Last-Event-ID`", and every release that numbers them (0.22, upstream's branch) replays.
 */
import type { HermesSseEvent, RunEventsOutput } from '../../index.js';
import { seqOf } from '../../operations/event-reader.js';

/** Which rule judged a reconnect, and why: recorded in the evidence and the reports. */
export interface ReconnectRule {
  applied: 'replay' | 'no_replay';
  why: string;
}

/** The rule the cut stream's events call for, with the cursor to resume after when they are numbered. */
export function reconnectRule(delivered: HermesSseEvent[]): ReconnectRule & { cursor?: number } {
  const seqs = delivered.map(seqOf);
  if (seqs.length === 0 || seqs.some((seq) => seq === undefined)) {
    return {
      applied: 'no_replay',
      why: 'the events the cut stream delivered carry no number (no `seq`, no SSE `id:`): the endpoint declares no resumable stream, so a reconnect must repeat nothing, and not_found or a gap is reported',
    };
  }
  return {
    applied: 'replay',
    cursor: Math.max(...(seqs as number[])),
    why: 'the events the cut stream delivered are numbered (`seq`, SSE `id:`): the endpoint declares a resumable stream, so a reconnect with the last `seq` as cursor must deliver exactly the missed events',
  };
}

/**
 * What is wrong with a reconnect after `cursor`, or undefined when it delivered exactly the events
 * after it: numbers contiguous from `cursor + 1`, none at or below the cursor, none the cut stream
 * delivered, none twice, and a jump only where `events_lost` names it. (A dropped last event cannot be
 * told from one Hermes has not sent yet.)
 */
export function resumptionProblem(cursor: number, delivered: HermesSseEvent[], resumed: RunEventsOutput | undefined): string | undefined {
  const had = new Set(delivered.map(eventKey));
  const lost = resumed?.events_lost ?? [];
  let expected = cursor + 1;
  for (const [index, event] of (resumed?.events ?? []).entries()) {
    const seq = seqOf(event);
    if (had.has(eventKey(event))) return `it delivered again an event the cut stream had delivered (${event.event}, seq ${String(seq)})`;
    if (seq === undefined) return `event ${index} (${event.event}) carries no seq`;
    const declared = lost.find((range) => range.after_events === index && range.from_seq === expected);
    if (declared) expected = declared.to_seq === null ? seq : declared.to_seq + 1;
    if (seq < expected) return `it delivered seq ${seq} where seq ${expected} was next: an event at or below one already delivered was repeated`;
    if (seq > expected) return `it delivered seq ${seq} where seq ${expected} was next: seq ${expected}..${seq - 1} dropped without events_lost`;
    expected = seq + 1;
  }
  return undefined;
}

/** An event as Hermes sent it, to find it again in another read: its name and timestamp. */
export function eventKey(event: HermesSseEvent): string {
  return `${event.event}@${String(event.data['timestamp'])}`;
}
