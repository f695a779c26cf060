/**
 * 1b. The pipeline's own cost: `run_status` through `connector.invoke` against the bare minimal
 * `dispatch()` handler (request-overhead.ts, `bareDispatchCall`), both on an in-memory dispatcher that
 * answers every request on the next turn of the event loop with the bench server's exact status
 * response. No sockets, no kernel and no server share the CPU, so the difference between the two
 * sides is what the connector itself does per call (validation, policy gates, headers, the call's
 * scope, the response checks, the receipt, the evidence), measured to a tenth of a microsecond
 * where the loopback figures of section 1 move by several microseconds from round to round.
 *
 * Target: the connector's CPU per call at most 2.5 times the bare handler's (issue #25), the
 * measure of the connector's own cost that replaced throughput against the loopback `dispatch()` floor.
 */
import { Dispatcher } from 'undici';
import { createHermesConnector } from 'aip-connector-hermes-agent';
import { ENDPOINT_ID } from './clients.js';
import { fullGc } from './heap.js';
import { pairedFigure, type BenchSettings, type Log, type SectionResult } from './report.js';
import { CONCURRENCY, bareDispatchCall, concurrentRound, connectorCall, slice, type Slice } from './request-overhead.js';
import { BENCH_API_KEY, renderStatus } from './servers.js';
import { interleave } from './stats.js';

/** Never dialled: the in-memory dispatcher answers every request itself. */
const ORIGIN = 'http://127.0.0.1:9';

/** The status response as the bench server sends it: node:http's headers and the pre-rendered body. */
const STATUS_BODY = renderStatus();
const STATUS_HEADERS = {
  'content-type': 'application/json; charset=utf-8',
  'content-length': String(STATUS_BODY.length),
  date: new Date(0).toUTCString(),
  connection: 'keep-alive',
  'keep-alive': 'timeout=30',
};

/** What a handler may call on its controller; nothing here is ever paused or aborted mid-body. */
class AnsweredController implements Dispatcher.DispatchController {
  aborted = false;
  paused = false;
  reason: Error | null = null;
  abort(reason: Error): void {
    this.aborted = true;
    this.reason = reason;
  }
  pause(): void {}
  resume(): void {}
}

/** Answers every GET with the status response on the next macrotask, as a socket read would arrive. */
class InMemoryStatusDispatcher extends Dispatcher {
  override dispatch(_options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    setImmediate(answer, handler);
    return true;
  }
  override async close(): Promise<void> {}
  override async destroy(): Promise<void> {}
}

function answer(handler: Dispatcher.DispatchHandler): void {
  const controller = new AnsweredController();
  handler.onRequestStart?.(controller, {});
  if (controller.aborted) return;
  handler.onResponseStart?.(controller, 200, STATUS_HEADERS, 'OK');
  if (controller.aborted) return;
  handler.onResponseData?.(controller, STATUS_BODY);
  handler.onResponseEnd?.(controller, {});
}

export async function benchPipelineCost(settings: BenchSettings, log: Log): Promise<SectionResult> {
  const plan = settings.quick ? { slices: 6, per: 5_000 } : { slices: 10, per: 10_000 };
  const dispatcher = new InMemoryStatusDispatcher();
  const connector = createHermesConnector({ endpoints: [{ id: ENDPOINT_ID, baseUrl: ORIGIN, apiKey: BENCH_API_KEY }], dispatcher });
  const viaConnector = connectorCall(connector);
  const viaBare = bareDispatchCall(dispatcher, ORIGIN);
  try {
    for (const call of [viaBare, viaConnector]) await slice(call, 4 * plan.per, CONCURRENCY);
    log(`  in-memory dispatcher, concurrency ${CONCURRENCY}: ${settings.rounds} rounds x ${plan.slices} alternating slices x ${plan.per} calls per side`);
    const measured = await interleave<Slice, 'bare_dispatch' | 'connector', ReturnType<typeof concurrentRound>>(
      { bare_dispatch: () => slice(viaBare, plan.per, CONCURRENCY), connector: () => slice(viaConnector, plan.per, CONCURRENCY) },
      { rounds: settings.rounds, warmupRounds: settings.warmupRounds, beforeRound: () => fullGc(1), slices: plan.slices, merge: concurrentRound },
    );
    const cpu = (side: 'bare_dispatch' | 'connector') => measured.rounds[side].map((round) => round.cpu_us_per_request);
    return {
      id: 'pipeline_cost',
      title: 'Pipeline cost (run_status, no network)',
      config: { dispatcher: 'in memory, answers on the next macrotask', slices_per_round: plan.slices, calls_per_slice: plan.per, concurrency: CONCURRENCY },
      figures: [
        pairedFigure(
          {
            id: 'pipeline.cpu_per_call',
            label: `run_status CPU per call, concurrency ${CONCURRENCY}, in-memory dispatcher`,
            unit: 'us',
            ratioLabel: 'connector / bare dispatch() handler (user + system CPU of the process)',
            target: { op: '<=', value: 2.5, judgedOn: 'median' },
          },
          cpu('bare_dispatch'),
          cpu('connector'),
        ),
      ],
      rounds: measured.records,
      errors: [],
    };
  } finally {
    await connector.close();
  }
}
