/**
 * The torture's invariants, read from what outlives every kill: the simulators' request logs
 * and the webhook receiver's log (in the parent) and the durable ledger (plain SQL). `afterRestart` holds at every moment;
 * `atTheEnd` also needs the last child to have finished the whole plan.
 */
import type { HermSimulator, HermesSimulator } from 'aip-connector-hermes-agent/simulator';
import { FOLLOW_UP, START, actionName, capabilityOf, type ChildLine, type Lifecycle, type PlannedJob, type TorturePlan } from './plan.js';
import type { Row, TortureStore } from './stores.js';
import type { Arrival } from './webhook-receiver.js';

export type ResultLine = Extract<ChildLine, { t: 'result' }>;

export interface Observed {
  hermes: HermesSimulator;
  herm: HermSimulator;
  plan: TorturePlan;
  store: TortureStore;
}

/** A settled ledger record as the invariants compare it. */
interface Recorded {
  state: string;
  status: string | null;
  code: string | null;
  run_id: string | null;
}

const PREFIX = 'connector.hermes_agent.';

/** Ledger records by `capability|action id` (every submission of a planned action uses its id). */
export async function recordsOf(store: TortureStore): Promise<Map<string, Recorded>> {
  const rows = await store.query('SELECT capability_id, action_id, state, result FROM idempotency_records');
  return new Map(rows.map((row: Row) => [`${row.capability_id}|${row.action_id}`, toRecorded(row)]));
}

function toRecorded(row: Row): Recorded {
  const result = row.result === null ? null : (JSON.parse(String(row.result)) as { status: string; error?: { code: string }; output?: { run_id?: string } });
  return { state: String(row.state), status: result?.status ?? null, code: result?.error?.code ?? null, run_id: result?.output?.run_id ?? null };
}

/** `POST /v1/runs` that reached Hermes, by the Idempotency-Key it carried. */
function startsByProviderKey(hermes: HermesSimulator): Map<string, number> {
  const counts = new Map<string, number>();
  for (const request of hermes.requests) {
    if (request.method !== 'POST' || request.path !== '/v1/runs') continue;
    const key = String(request.headers['idempotency-key'] ?? '(none)');
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

export function duplicateStarts(hermes: HermesSimulator): string[] {
  return [...startsByProviderKey(hermes)]
    .filter(([, count]) => count > 1)
    .map(([key, count]) => `${count} POST /v1/runs reached Hermes with Idempotency-Key ${key}`);
}

function toolUseIdOf(event: Record<string, unknown>): string {
  return String(event.tool_use_id);
}

/** Final (completed or failed) results Herm accepted for a planned job's tool call. */
export function finalsOf(herm: HermSimulator, job: PlannedJob): number {
  return herm.accepted(job.sessionId).filter((event) => event.tool_use_id === toolUseIdOf(job.event) && event.status !== 'running').length;
}

/** Checks that hold after every kill and restart; `settled` carries the done records seen so far, which must never change. */
export async function afterRestart(observed: Observed, settled: Map<string, string>): Promise<string[]> {
  const problems = duplicateStarts(observed.hermes);
  for (const job of observed.plan.jobs) {
    const finals = finalsOf(observed.herm, job);
    if (finals > 1) problems.push(`${finals} final results accepted for ${job.sessionId}/${toolUseIdOf(job.event)}`);
  }
  for (const [id, record] of await recordsOf(observed.store)) {
    if (record.state !== 'done') continue;
    const now = JSON.stringify(record);
    const before = settled.get(id);
    if (before !== undefined && before !== now) problems.push(`the recorded outcome of ${id} changed from ${before} to ${now}`);
    settled.set(id, now);
  }
  const integrity = await observed.store.integrity();
  if (integrity !== null && integrity !== 'ok') problems.push(`PRAGMA integrity_check: ${integrity}`);
  for (const run of completedStartsHermesNeverAnswered(observed, await recordsOf(observed.store))) problems.push(run);
  return problems;
}

/** A start recorded `completed` must name a run Hermes created for that very request. */
function completedStartsHermesNeverAnswered(observed: Observed, records: Map<string, Recorded>): string[] {
  const problems: string[] = [];
  for (const [id, record] of records) {
    if (!id.startsWith(`${capabilityOf('run_start')}|`) || record.status !== 'completed') continue;
    const run = record.run_id === null ? undefined : observed.hermes.run(record.run_id);
    if (!run) problems.push(`${id} is recorded completed with run ${record.run_id}, which Hermes never created`);
  }
  return problems;
}

export interface FinalVerdict {
  problems: string[];
  /** Planned keyed actions and bridge jobs. */
  actions: number;
  outcomes: Record<string, number>;
  lost: number;
}

/** How an action ended, for the summary: completed, failed:<code>, outcome_unknown, or why it was never sent. */
function kindOf(status: string, code: string | null): string {
  if (code === `${PREFIX}outcome_unknown`) return 'outcome_unknown';
  if (status === 'completed' || status === 'nothing_to_stop') return status;
  return `${status}:${(code ?? 'none').replace(PREFIX, '')}`;
}

/** A keyed action a lifecycle planned, and the ledger record (capability, action id) that keeps its outcome. */
interface PlannedAction {
  name: string;
  capability: string;
  recordedAs: string;
}

/** The keyed actions of a lifecycle: its start and, unless it only reads events, its follow-up. */
function plannedActions(lifecycle: Lifecycle): PlannedAction[] {
  const start = actionName(lifecycle, START);
  const actions: PlannedAction[] = [{ name: start, capability: capabilityOf('run_start'), recordedAs: start }];
  const step = FOLLOW_UP[lifecycle.kind];
  if (step === null) return actions;
  const name = actionName(lifecycle, step);
  // cancel() turns the start action into a run_stop under the start's action id.
  const recordedAs = lifecycle.kind === 'cancel' ? start : name;
  actions.push({ name, capability: capabilityOf(lifecycle.kind === 'approval' ? 'run_approval' : 'run_stop'), recordedAs });
  return actions;
}

/**
 * After the last child finished the plan: every planned action has exactly one outcome that
 * every report agrees with, recorded (settled) in the ledger unless Hermes certainly did nothing;
 * one accepted final result per bridge job; nothing duplicated. (A bridge job's start left in
 * flight by a killed process stays so: recover() reports it failed without sending it again.)
 */
export async function atTheEnd(observed: Observed, lastChild: ResultLine[]): Promise<FinalVerdict> {
  const problems = await afterRestart(observed, new Map());
  const records = await recordsOf(observed.store);
  const lines = new Map<string, ResultLine[]>();
  for (const line of lastChild) lines.set(line.action, [...(lines.get(line.action) ?? []), line]);
  const outcomes: Record<string, number> = {};
  const count = (kind: string) => (outcomes[kind] = (outcomes[kind] ?? 0) + 1);
  let actions = 0;
  let lost = 0;
  for (const lifecycle of observed.plan.lifecycles) {
    for (const action of plannedActions(lifecycle)) {
      actions++;
      const reports = lines.get(action.name) ?? [];
      const startReports = lines.get(actionName(lifecycle, START)) ?? [];
      if (action.name !== actionName(lifecycle, START) && startReports[0]?.status !== 'completed') {
        count('not_sent:start_had_no_run');
        continue;
      }
      if (reports.length === 0) {
        lost++;
        problems.push(`${action.name}: no outcome reported`);
        continue;
      }
      const record = records.get(`${action.capability}|${action.recordedAs}`);
      for (const report of reports) {
        const disagrees = record
          ? report.status !== record.status || report.code !== record.code || report.run_id !== record.run_id
          : report.status === 'completed' || report.code === `${PREFIX}outcome_unknown`;
        if (disagrees) problems.push(`${action.name}: reported ${JSON.stringify(report)} but the ledger holds ${JSON.stringify(record ?? null)}`);
      }
      if (lifecycle.duplicate && action.name === actionName(lifecycle, START) && reports.length !== 2)
        problems.push(`${action.name}: ${reports.length} reports from the two replicas`);
      count(kindOf((reports[0] as ResultLine).status, (reports[0] as ResultLine).code));
    }
  }
  const jobs = await observed.store.query('SELECT session_id, tool_use_id, state, final_status FROM herm_jobs');
  for (const job of observed.plan.jobs) {
    actions++;
    const toolUseId = toolUseIdOf(job.event);
    const finals = finalsOf(observed.herm, job);
    const row = jobs.find((candidate) => candidate.session_id === job.sessionId && candidate.tool_use_id === toolUseId);
    if (finals !== 1 || row?.state !== 'done') {
      lost++;
      problems.push(`bridge job ${job.sessionId}/${toolUseId}: ${finals} accepted final results, job ${JSON.stringify(row ?? null)}`);
      continue;
    }
    count(`bridge_final:${String(row.final_status)}`);
  }
  return { problems, actions, outcomes, lost };
}

export interface DeliveryVerdict {
  problems: string[];
  events_journaled: number;
  /** Verified deliveries the receiver got, accepted or not. */
  deliveries: number;
  /** Deliveries beyond the first of their webhook-id. */
  duplicate_deliveries: number;
  /** Journaled events the receiver never accepted. */
  lost_events: number;
  /** Runs whose events first arrived out of sequence order. */
  reordered: number;
}

const eventKey = (tenantScope: unknown, endpointId: unknown, runId: unknown, sequence: unknown) =>
  `${String(tenantScope)}|${String(endpointId)}|${String(runId)}#${String(sequence)}`;
const runOf = (key: string) => key.slice(0, key.lastIndexOf('#'));

/** The first arrival of each event, and the webhook-ids its deliveries carried. */
function arrivalsByEvent(arrivals: readonly Arrival[]): Map<string, { first: Arrival; ids: Set<string>; accepted: boolean }> {
  const events = new Map<string, { first: Arrival; ids: Set<string>; accepted: boolean }>();
  for (const arrival of arrivals) {
    const key = eventKey(arrival.tenantScope, arrival.endpointId, arrival.runId, arrival.sequence);
    const seen = events.get(key) ?? { first: arrival, ids: new Set<string>(), accepted: false };
    seen.ids.add(arrival.webhookId);
    seen.accepted ||= arrival.accepted;
    events.set(key, seen);
  }
  return events;
}

/** Runs whose events' first arrivals are not in increasing sequence order. */
function reorderedRuns(firstArrivals: readonly Arrival[]): string[] {
  const lastSequence = new Map<string, number>();
  const reordered = new Set<string>();
  for (const arrival of [...firstArrivals].sort((a, b) => a.order - b.order)) {
    const run = runOf(eventKey(arrival.tenantScope, arrival.endpointId, arrival.runId, arrival.sequence));
    if ((lastSequence.get(run) ?? 0) > arrival.sequence) reordered.add(run);
    lastSequence.set(run, arrival.sequence);
  }
  return [...reordered];
}

/**
 * After the last child settled every delivery: each journaled event reached the receiver (accepted at
 * least once), all deliveries of one event carry one webhook-id and no id names two events, each run's
 * events first arrived in sequence order, nothing arrived that is not journaled, nothing was given up.
 */
export async function deliveredAtTheEnd(store: TortureStore, arrivals: readonly Arrival[]): Promise<DeliveryVerdict> {
  const journaled = await store.query('SELECT tenant_scope, endpoint_id, run_id, sequence FROM run_journal_events');
  const journaledKeys = new Set(journaled.map((row) => eventKey(row.tenant_scope, row.endpoint_id, row.run_id, row.sequence)));
  const events = arrivalsByEvent(arrivals);
  const problems: string[] = [];
  const lost = [...journaledKeys].filter((key) => !events.get(key)?.accepted);
  if (lost.length > 0) problems.push(`${lost.length} journaled events never accepted by the receiver, e.g. ${lost.slice(0, 3).join(', ')}`);
  for (const [key, seen] of events) {
    if (seen.ids.size > 1) problems.push(`event ${key} was delivered under ${seen.ids.size} webhook-ids`);
    if (!journaledKeys.has(key)) problems.push(`the receiver got event ${key}, which is not journaled`);
  }
  const eventsById = new Map<string, Set<string>>();
  for (const [key, seen] of events) for (const id of seen.ids) eventsById.set(id, (eventsById.get(id) ?? new Set()).add(key));
  for (const [id, keys] of eventsById) if (keys.size > 1) problems.push(`webhook-id ${id} named ${keys.size} events`);
  const reordered = reorderedRuns([...events.values()].map((seen) => seen.first));
  if (reordered.length > 0) problems.push(`events first arrived out of order in runs ${reordered.slice(0, 3).join(', ')}`);
  const givenUp = await store.query("SELECT run_id, given_up_reason, last_error FROM run_deliveries WHERE state <> 'delivered'");
  for (const row of givenUp) problems.push(`delivery of ${String(row.run_id)} ended unsettled: ${JSON.stringify(row)}`);
  return {
    problems,
    events_journaled: journaledKeys.size,
    deliveries: arrivals.length,
    duplicate_deliveries: arrivals.length - eventsById.size,
    lost_events: lost.length,
    reordered: reordered.length,
  };
}
