/**
 * Hermes' run vocabulary, in one place: the statuses after which a run changes no more, the
 * events that end a run's stream, and how the two correspond. (The simulator keeps its own
 * copy on purpose, as an independent implementation; a test holds the two equal.)
 */

/** Statuses after which Hermes does no more work on a run (`interrupted` is a later Hermes' restart verdict). */
export const TERMINAL_STATUSES: ReadonlySet<string> = new Set(['completed', 'failed', 'cancelled', 'interrupted']);

const STATUS_OF_TERMINAL_EVENT: Readonly<Record<string, string>> = {
  'run.completed': 'completed',
  'run.failed': 'failed',
  'run.cancelled': 'cancelled',
  // A later Hermes (after 0.20.1) ends a run its gateway shut down under with this event.
  'run.interrupted': 'interrupted',
};

/** Events that end a run's event stream. */
export const TERMINAL_EVENTS: ReadonlySet<string> = new Set(Object.keys(STATUS_OF_TERMINAL_EVENT));

/** The status a terminal event stands for; undefined for any other event. */
export function statusOfTerminalEvent(event: string): string | undefined {
  return Object.hasOwn(STATUS_OF_TERMINAL_EVENT, event) ? STATUS_OF_TERMINAL_EVENT[event] : undefined;
}

/** Event kinds a Hermes at the pin or later emits, for bounded metric attributes. */
export const KNOWN_EVENT_KINDS: ReadonlySet<string> = new Set([
  'message.delta',
  'reasoning.available',
  'tool.started',
  'tool.completed',
  'approval.request',
  'approval.responded',
  'message.interim',
  'subagent.start',
  'subagent.complete',
  'run.steered',
  ...TERMINAL_EVENTS,
]);
