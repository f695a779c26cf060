import type { EndpointSession } from './session.js';

export const CHECK_IDS = [
  'discovery',
  'start_and_status',
  'ordered_events',
  'isolated_approvals',
  'approval_requires_evidence',
  'stop_followed',
  'disconnect_reconciled',
  'evidence_loss',
] as const;

export type CheckId = (typeof CHECK_IDS)[number];

/** What a check retains: identities, statuses, event names, codes; never a key or a prompt. */
export type CheckEvidence = Record<string, unknown>;

/**
 * One of the seed's eight "Verify an integration" items for one endpoint. `run` writes its evidence
 * into `evidence` as it goes (so a failure keeps what was seen) and throws CheckFailed to fail.
 */
export interface Check {
  readonly id: CheckId;
  /** The seed's wording of what is verified. */
  readonly title: string;
  run(session: EndpointSession, evidence: CheckEvidence): Promise<void>;
}

/** A check's verdict: the reason is one sentence an operator can act on. */
export class CheckFailed extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'CheckFailed';
  }
}

/** The statuses after which Hermes does no more work on a run (`interrupted` is the later profile's restart loss). */
export const TERMINAL_STATUSES: ReadonlySet<string> = new Set(['completed', 'failed', 'cancelled', 'interrupted']);
export const TERMINAL_EVENTS: readonly string[] = ['run.completed', 'run.failed', 'run.cancelled'];
