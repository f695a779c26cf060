/**
 * The torture's invariants, read from what outlives every kill: the simulators' request logs
 * (in the parent) and the durable ledger (plain SQL). `afterRestart` holds at every moment;
 * `atTheEnd` also needs the last child to have finished the whole plan.
 */
import type { HermSimulator, HermesSimulator } from 'aip-connector-hermes-agent/simulator';
import { FOLLOW_UP, START, actionName, capabilityOf, type ChildLine, type Lifecycle, type PlannedJob, type TorturePlan } from './plan.js';
import type { Row, TortureStore } from './stores.js';

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
