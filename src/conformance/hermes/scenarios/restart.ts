import { createMemoryLedger, type HermesConnector, type HermesSseEvent, type RunEventsOutput } from '../../../index.js';
import type { ScenarioEvidence } from '../../kit/types.js';
import { codeOf, outcome, type Harness, type Invocation } from '../harness.js';
import { eventKey, reconnectRule, resumptionProblem } from '../../../cli/qualify/resumption.js';

/** Lets Hermes notice the closed subscriber before the connector subscribes again. */
const SETTLE_MS = 250;
/** How long a resumed read of the still-active run is followed: the events missed by then are judged. */
const RESUME_ATTEMPT_MS = 3_000;

/**
 * The kit restarts the connector (close it, build a new one over the same ledger, as a host
 * restarts a process over its durable store) in the middle of a run whose stream was cut.
 */
export async function restartReconnect(h: Harness): Promise<ScenarioEvidence> {
  const ledger = createMemoryLedger();
  const before = h.connector(ledger);
  const run = await h.startRun(before, 'long');
  const cut = new AbortController();
  const first = await h.readEvents(before, run.runId, { context: { signal: cut.signal }, onChunk: () => cut.abort() });
  await before.close();

  const after = h.connector(ledger);
  const recovered = await after.evidence(run.action.id, { tenantId: h.tenant });
  const requestsBefore = h.proxy.requests.length;
  const reconciled = await after.reconcile();
  const statusReads = h.proxy.requests.slice(requestsBefore).filter((request) => request.path === `/v1/runs/${run.runId}`);
  const reread = reconciled.find((binding) => binding.run_id === run.runId);
  const stateRecovered =
    recovered?.run_id === run.runId && statusReads.length === 1 && reread !== undefined && reread.updated_at >= (recovered?.updated_at ?? Infinity);

  const redelivered = await h.send(after, run.action);
  const noDuplicate = redelivered.requests.length === 0 && (redelivered.result.output as { run_id?: unknown } | undefined)?.run_id === run.runId;

  const delivered = (first.result.output as RunEventsOutput | undefined)?.events ?? [];
  const { cursor, ...rule } = reconnectRule(delivered);
  const reconnect = cursor === undefined ? await resubscribed(h, after, run.runId, delivered) : await resumed(h, after, run.runId, delivered, cursor);
  const { again } = reconnect;
  const secondEvents = (again.result.output as RunEventsOutput | undefined)?.events ?? [];
  const status = await h.status(after, run.runId);
  const honest = first.result.status !== 'completed' && reconnect.problem === undefined && again.result.receipt?.['replayed'] !== true && status !== undefined;

  return {
    source: h.provider.source,
    assertions: {
      state_recovered: outcome(
        stateRecovered,
        stateRecovered
          ? 'after the restart the ledger still bound the action to its run, and reconcile() re-read its status from Hermes (one request)'
          : `after the restart: binding ${recovered ? recovered.run_id : 'missing'}, ${statusReads.length} status read(s) by reconcile()`,
      ),
      duplicate_effect_prevented: outcome(
        noDuplicate,
        noDuplicate
          ? 'the start redelivered after the restart was answered from the ledger with the same run and no request'
          : `the redelivered start made ${redelivered.requests.length} request(s) and answered ${codeOf(redelivered.result) ?? redelivered.result.status}`,
      ),
      reconnect_cursor_resumed: outcome(
        honest,
        honest
          ? `${rule.applied} rule (${rule.why}). The cut stream was not reported complete; ${reconnect.summary}; run_status then gave the run's state (${String(status)})`
          : `${rule.applied} rule: the cut stream answered ${first.result.status}; ${reconnect.problem ?? 'the reconnect claimed a replay'}; the run's status ${status === undefined ? 'could not be read' : 'was read'}`,
      ),
    },
    artifacts: [run.action.id, run.runId, first.action.id, again.action.id, ...statusReads.map((request) => request.id)],
    hostRoles: [
      'restart: the kit closed the connector and built a new one over the same ledger (the host’s durable store)',
      'reconnect: the kit subscribed to the run again after the restart',
    ],
    observations: {
      cut_stream: { action_id: first.action.id, status: first.result.status, code: first.result.error?.code ?? null, chunks: first.chunks.length },
      recovered_binding: recovered ? { action_id: recovered.action_id, run_id: recovered.run_id, last_status: recovered.last_status } : null,
      resubscription: {
        action_id: again.action.id,
        code: again.result.error?.code ?? null,
        events: secondEvents.length,
        seqs: secondEvents.map((event) => event.data['seq'] ?? event.id ?? null),
        events_lost: (again.result.output as RunEventsOutput | undefined)?.events_lost ?? [],
      },
      status_after: status ?? null,
      rule: { applied: rule.applied, why: rule.why },
      cursor: cursor ?? null,
    },
    detail: 'a connector restart over a surviving ledger, mid-run, with the stream cut',
  };
}

interface Reconnect {
  again: Invocation;
  /** What the reconnect got wrong, if anything. */
  problem: string | undefined;
  summary: string;
}

/** No numbered events: a fresh subscription must repeat nothing the cut stream delivered (not_found, or only later events). */
async function resubscribed(h: Harness, connector: HermesConnector, runId: string, delivered: HermesSseEvent[]): Promise<Reconnect> {
  await h.clock.sleep(SETTLE_MS);
  const again = await h.readEvents(connector, runId);
  const had = new Set(delivered.map(eventKey));
  const replayed = ((again.result.output as RunEventsOutput | undefined)?.events ?? []).filter((event) => had.has(eventKey(event)));
  const summary =
    codeOf(again.result) === 'not_found'
      ? 'Hermes answered not_found: it keeps no replay cursor, and the connector reported the gap instead of a resumed stream'
      : `the second subscription answered ${codeOf(again.result) ?? again.result.status} without any event the cut stream had delivered`;
  return { again, problem: replayed.length > 0 ? `${replayed.length} event(s) were delivered twice` : undefined, summary };
}

/** Numbered events: the new connector resumes after the last `seq` delivered, and must deliver exactly the missed events within the attempt. */
async function resumed(h: Harness, connector: HermesConnector, runId: string, delivered: HermesSseEvent[], cursor: number): Promise<Reconnect> {
  const again = await h.readEvents(connector, runId, { lastSeq: cursor, context: { deadline: h.clock.now() + RESUME_ATTEMPT_MS } });
  const output = again.result.output as RunEventsOutput | undefined;
  const problem = output ? resumptionProblem(cursor, delivered, output) : `the resumption read no stream (${codeOf(again.result) ?? again.result.status})`;
  const summary = `resumed after seq ${cursor}, it delivered ${output?.events.length ?? 0} event(s), contiguous and none repeated${output?.events_lost ? ', with the ones Hermes no longer kept named in events_lost' : ''}`;
  return { again, problem, summary };
}
