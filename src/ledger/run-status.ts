import type { RunEvidence } from './types.js';

/** Hermes statuses after which a run changes no more (`interrupted` is the newer Hermes' restart verdict). */
export const TERMINAL_STATUSES: ReadonlySet<string> = new Set(['completed', 'failed', 'cancelled', 'interrupted']);

const STATUS_OF_TERMINAL_EVENT: Readonly<Record<string, string>> = {
  'run.completed': 'completed',
  'run.failed': 'failed',
  'run.cancelled': 'cancelled',
};

export function statusOfTerminalEvent(event: string): string | undefined {
  return STATUS_OF_TERMINAL_EVENT[event];
}

/** A binding still worth reconciling: not terminal, evidence not lost. */
export function isOpen(evidence: RunEvidence): boolean {
  return !evidence.evidence_lost && !isSettled(evidence);
}

/** The binding recorded a terminal outcome: later reads, however late they land, never reopen it. */
export function isSettled(evidence: Pick<RunEvidence, 'last_status' | 'terminal_event'>): boolean {
  return evidence.terminal_event !== null || TERMINAL_STATUSES.has(evidence.last_status);
}
