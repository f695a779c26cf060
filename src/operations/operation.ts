import type { Context } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { OpenCalls } from '../transport/call-scope.js';
import type { ChunkPublisher } from '../chunks.js';
import type { ResolvedConfig, ResolvedEndpoint } from '../config.js';
import { HermesFailure } from '../failures.js';
import type { EndpointPools } from '../transport/http.js';
import type { OperationDeclaration } from '../contract/schemas.js';
import type { Telemetry } from '../telemetry.js';
import type { RunEvidence, RunEvidencePatch } from '../ledger/types.js';
import type { JournalStore } from '../journal/types.js';
import type { EndpointOffers } from '../discovery/offers.js';
import type { EndpointOffer } from '../discovery/offer.js';
import type { AipAction, AipActionResult, AipMessagePart, EventsLostRange, ExecutionContext, OperationName } from '../types.js';

/** Everything an operation needs for one invocation, after every gate has passed. */
export interface OperationCall<Input = Record<string, unknown>> {
  readonly endpoint: ResolvedEndpoint;
  readonly declaration: OperationDeclaration;
  readonly action: AipAction;
  readonly input: Input;
  readonly context: ExecutionContext;
  /** The AIP deadline in force: the context's, else the contract's timeout from the start of the call. */
  readonly deadline: number;
  readonly config: ResolvedConfig;
  readonly pools: EndpointPools;
  /** Closed with the connector: the calls in flight end as cancelled. */
  readonly openCalls: OpenCalls;
  readonly logger: Logger;
  readonly publisher: ChunkPublisher;
  /** Called once the provider has answered with headers, for the receipt. */
  readonly onHttpStatus: (status: number) => void;
  readonly telemetry: Telemetry;
  /** The invocation's span context: the parent of its HTTP request spans. */
  readonly traceContext: Context;
  /** What each endpoint declares it offers (GET /v1/capabilities), read once per endpoint. */
  readonly offers: EndpointOffers;
  /** run_events with the run journal on: where it reads the run's events instead of Hermes. */
  readonly journal?: JournalReading;
  /** run_events for a journal's follower: told of each range of events Hermes no longer kept, before any event after it is published. */
  readonly onEventsLost?: (lost: EventsLostRange) => Promise<void>;
}

/** The run journal as its readers see it. */
export interface JournalReading {
  readonly store: JournalStore;
  /** A reader waiting for an append reads again after this long even if it heard of none. */
  readonly safetyRereadMs: number;
}

export interface OperationOutcome {
  status: 'completed' | 'failed' | 'cancelled';
  output?: unknown;
  message?: AipMessagePart[];
  /** Present when status is failed, or cancelled by the connector. */
  failure?: HermesFailure;
}

/** What the connector knows about the invocation whose result keeps evidence. */
export interface EvidenceSource<Input> {
  readonly endpoint: ResolvedEndpoint;
  readonly capabilityId: string;
  readonly actionId: string;
  readonly input: Input;
  readonly context: ExecutionContext;
  readonly result: AipActionResult;
  readonly now: number;
}

export interface Operation<Input = Record<string, unknown>> {
  readonly name: OperationName;
  /** Checks that JSON Schema cannot express; throws `invalid_input`. */
  checkInput?(input: Input): void;
  execute(call: OperationCall<Input>): Promise<OperationOutcome>;
  /**
   * What of its output the output schema is checked against: all of it unless the operation
   * leaves out a part it built itself and whose shape it guarantees (the schema could not fail there).
   */
  checkedOutput?(output: unknown): unknown;
  /**
   * Whether, on an endpoint offering this, a request whose answer was lost may be sent again with
   * the same key and body: the endpoint answers a repeat with the first request's outcome rather
   * than acting twice. Absent: never sent again.
   */
  resendableOn?(offer: EndpointOffer): boolean;
  /** An operation that starts a run: the binding its successful result creates. */
  bindRun?(source: EvidenceSource<Input>): RunEvidence | undefined;
  /** An operation on a bound run (`input.run_id`): what its result teaches about that run. */
  learnAboutRun?(source: EvidenceSource<Input>): RunEvidencePatch | undefined;
}

const MAX_RUN_ID_BYTES = 512;

/** A Hermes route: the path sent, and its template for traces (never the run id itself). */
export interface Route {
  path: string;
  template: string;
}

export const RUNS_ROUTE: Route = { path: '/v1/runs', template: '/v1/runs' };

/** The run handle as one percent-encoded path segment (schema already refused control characters, '.' and '..'). */
export function runRoute(runId: string, suffix: RunRouteSuffix): Route {
  return { path: `/v1/runs/${encodeURIComponent(runId)}${suffix}`, template: RUN_ROUTES[suffix].template };
}

type RunRouteSuffix = '' | '/events' | '/approval' | '/stop' | '/steer';

/** Each route on one run: its template for traces, and the operation that sends it. */
const RUN_ROUTES: Record<RunRouteSuffix, { template: string; operation: OperationName }> = {
  '': { template: '/v1/runs/{run_id}', operation: 'run_status' },
  '/events': { template: '/v1/runs/{run_id}/events', operation: 'run_events' },
  '/approval': { template: '/v1/runs/{run_id}/approval', operation: 'run_approval' },
  '/stop': { template: '/v1/runs/{run_id}/stop', operation: 'run_stop' },
  '/steer': { template: '/v1/runs/{run_id}/steer', operation: 'run_steer' },
};

const RUN_PATH = /^\/v1\/runs\/[^/]+(\/[a-z]+)?$/;

/**
 * The operation that sends a request with this method and path (query ignored), read from the same
 * routes the operations build; undefined for any other request. The run id never leaves here.
 */
export function operationOfRequest(method: string, path: string): OperationName | undefined {
  const route = path.split('?', 1)[0] ?? '';
  if (route === RUNS_ROUTE.path) return method === 'POST' ? 'run_start' : undefined;
  const match = RUN_PATH.exec(route);
  if (match === null) return undefined;
  const suffix = match[1] ?? '';
  return Object.hasOwn(RUN_ROUTES, suffix) ? RUN_ROUTES[suffix as RunRouteSuffix].operation : undefined;
}

export function checkRunId(runId: string): void {
  if (!runId.isWellFormed()) throw new HermesFailure('invalid_input', '`run_id` is not well-formed Unicode');
  if (Buffer.byteLength(runId) > MAX_RUN_ID_BYTES) throw new HermesFailure('invalid_input', `\`run_id\` is longer than ${MAX_RUN_ID_BYTES} bytes`);
}
