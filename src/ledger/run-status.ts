import { TERMINAL_STATUSES } from '../contract/hermes-vocabulary.js';
import type { RunEvidence } from './types.js';

/** A binding still worth reconciling: not terminal, evidence not lost. */
export function isOpen(evidence: RunEvidence): boolean {
  return !evidence.evidence_lost && !isSettled(evidence);
}

/** The binding recorded a terminal outcome: later reads, however late they land, never reopen it. */
export function isSettled(evidence: Pick<RunEvidence, 'last_status' | 'terminal_event'>): boolean {
  return evidence.terminal_event !== null || TERMINAL_STATUSES.has(evidence.last_status);
}
