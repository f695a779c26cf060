import { createMemoryLedger, type HermesSseEvent, type RunEventsOutput } from '../../../index.js';
import type { ScenarioEvidence } from '../../kit/types.js';
import { codeOf, outcome, type Harness } from '../harness.js';

/** Lets Hermes notice the closed subscriber before the connector subscribes again. */
const SETTLE_MS = 250;

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

  await h.clock.sleep(SETTLE_MS);
  const again = await h.readEvents(after, run.runId);
  const delivered = new Set(((first.result.output as RunEventsOutput | undefined)?.events ?? []).map(eventKey));
  const secondEvents = (again.result.output as RunEventsOutput | undefined)?.events ?? [];
  const replayed = secondEvents.filter((event) => delivered.has(eventKey(event)));
  const status = await h.status(after, run.runId);
  const honest = first.result.status !== 'completed' && replayed.length === 0 && again.result.receipt?.['replayed'] !== true && status !== undefined;
  const gap =
    codeOf(again.result) === 'not_found'
      ? 'Hermes answered not_found: it keeps no replay cursor, and the connector reported the gap instead of a resumed stream'
      : `the second subscription answered ${codeOf(again.result) ?? again.result.status} without any event the cut stream had delivered`;

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
          ? `decided by the connector, not by a cursor: the pinned Hermes has no replay cursor. The cut stream was not reported complete; ${gap}; run_status then gave the run's state (${String(status)})`
          : `the cut stream answered ${first.result.status}; ${replayed.length} event(s) were delivered twice; the run's status ${status === undefined ? 'could not be read' : 'was read'}`,
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
      resubscription: { action_id: again.action.id, code: again.result.error?.code ?? null, events: secondEvents.length, replayed_events: replayed.length },
      status_after: status ?? null,
      cursor: 'none: Hermes at the pin drops a run’s event queue once its first reader leaves, so no resume is claimed',
    },
    detail: 'a connector restart over a surviving ledger, mid-run, with the stream cut',
  };
}

function eventKey(event: HermesSseEvent): string {
  return `${event.event}@${String(event.data['timestamp'])}`;
}
