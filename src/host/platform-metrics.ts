/**
 * What a platform team scrapes beside the reference's eight series (`metrics.ts`, unchanged): build
 * info, Node's process and runtime metrics, and latency histograms of actions and of Hermes calls, on
 * prom-client. Every label value comes from a bounded set (operation names, result statuses, status
 * classes), never from an id or a URL, so a flood of distinct runs and actions adds no series.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { OPERATION_NAMES } from '../contract/aip.js';
import { PACKAGE_VERSION } from '../internal/package-info.js';
import { operationOfRequest } from '../operations/operation.js';

/** Seconds, from a cached Hermes read (a few ms) to a run_start waiting on a model (minutes). */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const ACTION_OUTCOMES = new Set(['completed', 'failed', 'cancelled', 'pending_approval', 'requires_human']);
const OPERATIONS = new Set<string>(OPERATION_NAMES);
/** Set by `npm run image` in the image config; a host run from a checkout reports `unknown`. */
export const REVISION_VARIABLE = 'HERMES_AIP_REVISION';

export interface PlatformMetricsOptions {
  /** The commit the running code was built from (the image's `org.opencontainers.image.revision`). */
  readonly revision: string;
  /** The Hermes endpoints' origins: only requests to them are provider calls. */
  readonly hermesOrigins: readonly string[];
  /** The Hermes operation a capability id runs (undefined: not one of this connector's). */
  readonly operationOf: (capabilityId: string) => string | undefined;
}

export interface PlatformMetrics {
  /** One action answered after `seconds`, with its result status; `error` when the connector threw. */
  observeAction(capabilityId: string, outcome: string, seconds: number): void;
  /** The exposition text of every series here (Prometheus text 0.0.4, as the reference's eight). */
  text(): Promise<string>;
  /** Stops watching provider calls. */
  close(): void;
}

export function createPlatformMetrics(options: PlatformMetricsOptions): PlatformMetrics {
  const registry = new Registry();
  new Gauge({
    name: 'hermes_aip_build_info',
    help: 'The running hermes-aip build: its package version and source revision (always 1).',
    labelNames: ['version', 'revision'],
    registers: [registry],
  }).set({ version: PACKAGE_VERSION, revision: options.revision }, 1);
  collectDefaultMetrics({ register: registry });
  const actions = latencyHistogram(
    registry,
    'hermes_aip_action_duration_seconds',
    'Time from admitting an AIP action to its result, by Hermes operation and result status (error: the connector threw).',
  );
  const provider = latencyHistogram(
    registry,
    'hermes_aip_provider_request_duration_seconds',
    'Time from sending a request to Hermes to its response headers, by Hermes operation and status class (error: no response).',
  );
  const stopWatching = watchProviderCalls(new Set(options.hermesOrigins), (operation, outcome, seconds) => provider.observe({ operation, outcome }, seconds));
  return {
    observeAction(capabilityId, outcome, seconds) {
      const operation = options.operationOf(capabilityId);
      actions.observe(
        { operation: operation !== undefined && OPERATIONS.has(operation) ? operation : 'unknown', outcome: ACTION_OUTCOMES.has(outcome) ? outcome : 'error' },
        seconds,
      );
    },
    text: () => registry.metrics(),
    close: stopWatching,
  };
}

/** A histogram in seconds, labelled by operation and outcome only. */
function latencyHistogram(registry: Registry, name: string, help: string): Histogram<'operation' | 'outcome'> {
  return new Histogram({ name, help, labelNames: ['operation', 'outcome'], buckets: LATENCY_BUCKETS, registers: [registry] });
}

/** What undici publishes about a request on its diagnostics channels (the fields read here). */
interface UndiciRequest {
  readonly origin?: string | URL;
  readonly method?: string;
  readonly path?: string;
}

type ProviderObserver = (operation: string, outcome: string, seconds: number) => void;

/**
 * Times requests to the Hermes origins through undici's diagnostics channels, which both the
 * connector's pools and Node's fetch (the readiness probe) publish to: from the request's creation
 * to its response headers or its failure. Returns the unsubscribe.
 */
function watchProviderCalls(origins: ReadonlySet<string>, observe: ProviderObserver): () => void {
  const started = new WeakMap<UndiciRequest, number>();
  const finish = (request: UndiciRequest, outcome: string): void => {
    const at = started.get(request);
    if (at === undefined) return;
    started.delete(request);
    observe(providerOperation(request.method ?? '', request.path ?? ''), outcome, (performance.now() - at) / 1000);
  };
  const onCreate = (message: unknown): void => {
    const { request } = message as { request: UndiciRequest };
    if (origins.has(originOf(request.origin))) started.set(request, performance.now());
  };
  const onHeaders = (message: unknown): void => {
    const { request, response } = message as { request: UndiciRequest; response: { statusCode: number } };
    finish(request, `${Math.floor(response.statusCode / 100)}xx`);
  };
  const onError = (message: unknown): void => finish((message as { request: UndiciRequest }).request, 'error');
  subscribe('undici:request:create', onCreate);
  subscribe('undici:request:headers', onHeaders);
  subscribe('undici:request:error', onError);
  return () => {
    unsubscribe('undici:request:create', onCreate);
    unsubscribe('undici:request:headers', onHeaders);
    unsubscribe('undici:request:error', onError);
  };
}

function originOf(origin: string | URL | undefined): string {
  if (origin === undefined) return '';
  return typeof origin === 'string' ? origin : origin.origin;
}

/** The Hermes operation of a request (`health` for the health probe, `other` for any other route). */
function providerOperation(method: string, path: string): string {
  if (path.split('?', 1)[0] === '/health') return 'health';
  return operationOfRequest(method, path) ?? 'other';
}
