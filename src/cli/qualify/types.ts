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

export { CheckFailed } from './check-failed.js';
