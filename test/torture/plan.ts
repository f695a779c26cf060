/**
 * What the torture child is asked to do, shared by the parent (which grows the plan round by
 * round and checks the outcome) and the child (which carries it out, again after every kill).
 * Everything here is a pure function of the seed: the same seed plans the same actions.
 */
import type { RunStep } from 'aip-connector-hermes-agent/simulator';

export const ENDPOINT_ID = 'torture';
export const HERMES_KEY = 'hk_torture_key_0123456789abcdef';
export const HERM_KEY = 'herm_sk_torture_5f1e2d3c4b5a6978';
export const TOOL_NAME = 'hermes_run';
export const TENANTS = ['tenant-a', 'tenant-b'] as const;

/** What a lifecycle does after its start: read the events, answer an approval, stop, or cancel it. */
export type LifecycleKind = 'events' | 'approval' | 'stop' | 'cancel';

export interface Lifecycle {
  id: string;
  tenant: (typeof TENANTS)[number];
  kind: LifecycleKind;
  /** The replica that sends the start (0 or 1); with `duplicate`, the other sends it too, at once. */
  replica: 0 | 1;
  duplicate: boolean;
}

/** A custom tool call the agent made in Herm (the parent emits it), for the child's bridge. */
export interface JobSpec {
  sessionId: string;
  toolUseId: string;
  input: { prompt: string; sim_script: RunStep[] };
}

export interface PlannedJob {
  sessionId: string;
  /** The `agent.custom_tool_use` event as Herm emitted it: delivered again after every restart. */
  event: Record<string, unknown>;
}

export interface TorturePlan {
  lifecycles: Lifecycle[];
  jobs: PlannedJob[];
}

export type LedgerSpec = { kind: 'sqlite'; path: string } | { kind: 'postgres'; connectionString: string };

export interface ChildConfig {
  ledger: LedgerSpec;
  hermesUrl: string;
  hermUrl: string;
  /** A JSON file holding the TorturePlan (it outgrows an environment variable). */
  planFile: string;
  idempotencyLeaseMs: number;
  jobLeaseMs: number;
  /** The journal's and the outbox's lease: how soon a killed child's journals and deliveries are taken over. */
  journalLeaseMs: number;
  /** The parent's webhook receiver, and the owner-only file holding its secret. */
  webhook: { url: string; secretFile: string; timeoutMs: number };
  /** A deliberately broken ledger, to prove the torture can fail. */
  brokenLedger?: BrokenLedger;
}

/** claim-always: claims ignore every lease; skip-delivery: the outbox records one event more delivered than was. */
export type BrokenLedger = 'claim-always' | 'skip-delivery';

/** One line the child prints on stdout. */
export type ChildLine =
  | { t: 'ready'; pid: number }
  | { t: 'recovered' }
  | { t: 'result'; action: string; status: string; code: string | null; replayed: boolean; run_id: string | null }
  | { t: 'unavailable'; action: string }
  | { t: 'unsettled'; pending: unknown; now: number }
  | { t: 'done' };

/** The keyed steps of a lifecycle, by the name the child reports them under. */
export const START = 'start';
export const FOLLOW_UP: Record<LifecycleKind, string | null> = { events: null, approval: 'approve', stop: 'stop', cancel: 'cancel' };

export const actionName = (lifecycle: Lifecycle, step: string) => `${lifecycle.id}:${step}`;
export const keyOf = (lifecycle: Lifecycle, step: string) => `key-${lifecycle.id}-${step}`;
export const capabilityOf = (operation: string) => `cap:hermes_agent:${ENDPOINT_ID}:${operation}`;

export const pick = <T>(random: () => number, items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;

/** The simulator script of a lifecycle: approvals wait for an answer; stops and cancels need a run still going. */
export function scriptOf(kind: LifecycleKind): RunStep[] {
  if (kind === 'approval') {
    return [
      { type: 'delta', text: 'Checking ' },
      { type: 'approval', command: 'rm -rf ./scratch', description: 'recursive delete' },
      { type: 'tool', tool: 'terminal' },
      { type: 'complete', output: 'Removed.' },
    ];
  }
  if (kind === 'events')
    return [
      { type: 'delta', text: 'Hello' },
      { type: 'delta', text: ' world' },
      { type: 'complete', output: 'Hello world' },
    ];
  // Long enough to be stopped, short enough that a run nobody stopped (its stop was lost in a kill) ends by itself.
  return [
    { type: 'delta', text: 'working' },
    { type: 'sleep', ms: 1500 },
    { type: 'complete', output: 'late' },
  ];
}

/** The lifecycles and bridge jobs one round adds to the plan. */
export function planRound(random: () => number, round: number): { lifecycles: Lifecycle[]; jobs: JobSpec[] } {
  const lifecycles = Array.from(
    { length: 3 },
    (_, index): Lifecycle => ({
      id: `r${round}l${index}`,
      tenant: pick(random, TENANTS),
      kind: pick(random, ['events', 'approval', 'stop', 'cancel'] as const),
      replica: random() < 0.5 ? 0 : 1,
      duplicate: random() < 0.3,
    }),
  );
  const steps: RunStep[] =
    random() < 0.5
      ? scriptOf('events')
      : [
          { type: 'delta', text: 'Rendering' },
          { type: 'sleep', ms: 300 },
          { type: 'complete', output: 'Rendered.' },
        ];
  const jobs: JobSpec[] = [{ sessionId: `sesn_torture_${round}`, toolUseId: `toolu_torture_${round}`, input: { prompt: `job ${round}`, sim_script: steps } }];
  return { lifecycles, jobs };
}
