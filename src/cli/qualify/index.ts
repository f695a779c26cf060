import { approvalRequiresEvidence } from './approval-requires-evidence.js';
import { disconnectReconciled } from './disconnect-reconciled.js';
import { discovery } from './discovery.js';
import { evidenceLoss } from './evidence-loss.js';
import { isolatedApprovals } from './isolated-approvals.js';
import { orderedEvents } from './ordered-events.js';
import { startAndStatus } from './start-and-status.js';
import { stopFollowed } from './stop-followed.js';
import type { Check } from './types.js';

/** The seed's eight checks, in its order. */
export const CHECKS: readonly Check[] = [
  discovery,
  startAndStatus,
  orderedEvents,
  isolatedApprovals,
  approvalRequiresEvidence,
  stopFollowed,
  disconnectReconciled,
  evidenceLoss,
];
