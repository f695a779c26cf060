import type { AipActionResult, RunEventsOutput } from '../../../index.js';
import type { ScenarioEvidence } from '../../kit/types.js';
import { codeOf, outcome, type Harness } from '../harness.js';

/** Cancelled before dispatch: nothing sent. In flight: one stop, a cancelled result. Late: the terminal outcome stands. */
export async function cancellationRaces(h: Harness): Promise<ScenarioEvidence> {
  const connector = h.connector();
  const aborted = new AbortController();
  aborted.abort();
  const early = await h.invoke(connector, 'run_start', { body: h.provider.bodies.harmless() }, { context: { signal: aborted.signal } });
  const beforeDispatch = early.result.status === 'cancelled' && codeOf(early.result) === 'cancelled' && early.requests.length === 0;

  const active = await h.startRun(connector, 'long');
  const eventsAction = h.action('run_events', { run_id: active.runId });
  let cancelling: Promise<AipActionResult | null> | undefined;
  const stream = await h.send(connector, eventsAction, {
    onChunk: () => {
      cancelling ??= connector.cancel(eventsAction, h.context());
    },
  });
  h.runs.set(active.runId, { read: true });
  const cancelResult = (await cancelling) ?? null;
  const stops = stream.requests.filter((request) => request.method === 'POST' && request.path === `/v1/runs/${active.runId}/stop`);
  const inFlight = cancelResult?.status === 'completed' && stops.length === 1 && stream.result.status === 'cancelled';

  const finished = await h.startRun(connector, 'harmless');
  const read = await h.readEvents(connector, finished.runId);
  const before = await connector.evidence(finished.action.id, { tenantId: h.tenant });
  const late = await (async () => {
    const count = h.proxy.requests.length;
    const result = await connector.cancel(finished.action, h.context());
    return { result, requests: h.proxy.requests.slice(count) };
  })();
  const after = await connector.evidence(finished.action.id, { tenantId: h.tenant });
  const providerStatus = await h.status(connector, finished.runId);
  const terminalEvent = (read.result.output as RunEventsOutput | undefined)?.terminal_event ?? null;
  const preserved =
    read.result.status === 'completed' &&
    after?.terminal_event === terminalEvent &&
    after?.last_status === before?.last_status &&
    providerStatus === 'completed' &&
    late.result?.status !== 'cancelled';
  const lateStops = late.requests.filter((request) => request.path.endsWith('/stop'));

  return {
    source: h.provider.source,
    assertions: {
      before_dispatch_cancelled: outcome(
        beforeDispatch,
        beforeDispatch
          ? 'a run_start whose signal was already aborted came back cancelled with no request'
          : `the pre-cancelled start answered ${codeOf(early.result) ?? early.result.status} after ${early.requests.length} request(s)`,
      ),
      in_flight_cancelled: outcome(
        inFlight,
        inFlight
          ? 'cancelling the open event stream sent exactly one POST …/stop and the stream ended cancelled'
          : `cancel answered ${cancelResult ? (codeOf(cancelResult) ?? cancelResult.status) : 'nothing'}, ${stops.length} stop request(s), stream ${codeOf(stream.result) ?? stream.result.status}`,
      ),
      late_cancel_preserved_terminal: outcome(
        preserved,
        preserved
          ? `cancelling after ${String(terminalEvent)} left the ledger's terminal outcome and the provider's status completed (${lateStops.length} stop request(s) reached Hermes)`
          : `after the late cancel: ledger ${String(after?.terminal_event)}/${String(after?.last_status)}, provider ${String(providerStatus)}, cancel answered ${late.result ? (codeOf(late.result) ?? late.result.status) : 'nothing to stop'}`,
      ),
    },
    artifacts: [early.action.id, eventsAction.id, active.runId, ...stops.map((request) => request.id), finished.action.id, finished.runId],
    hostRoles: ['cancel authority (connector.cancel is the host cancelling an action it admitted)'],
    observations: {
      before_dispatch: { action_id: early.action.id, code: early.result.error?.code ?? null, provider_requests: early.requests.length },
      in_flight: {
        action_id: eventsAction.id,
        run_id: active.runId,
        chunks: stream.chunks.length,
        stream_status: stream.result.status,
        stop_requests: stops.map((request) => request.id),
      },
      late: {
        action_id: finished.action.id,
        terminal_event: terminalEvent,
        cancel_answer: late.result ? (late.result.error?.code ?? late.result.status) : null,
        stop_requests: lateStops.map((request) => ({ id: request.id, status: request.status })),
      },
    },
    detail: 'the three cancellation races against the same connector',
  };
}
