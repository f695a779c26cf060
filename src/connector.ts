import { createHash } from 'node:crypto';
import type { ValidateFunction } from 'ajv';
import type { Logger } from 'pino';
import { OpenCalls } from './transport/call-scope.js';
import { ChunkPublisher } from './chunks.js';
import { resolveConfig, type ResolvedConfig } from './config.js';
import { HermesFailure, toProtocolError } from './failures.js';
import { EndpointPools } from './transport/http.js';
import { isStorableId, typedId } from './internal/ids.js';
import { InFlight } from './internal/in-flight.js';
import { EndpointOffers } from './discovery/offers.js';
import { type GuardedOutcome, IdempotencyGuard } from './ledger/idempotency.js';
import { instrumentLedger } from './ledger/instrumented.js';
import { isSettled } from './ledger/run-status.js';
import { createMemoryLedger } from './ledger/memory.js';
import type { EvidenceWrite, IdempotencyScope, RunEvidence, RunLedger } from './ledger/types.js';
import { connectorLogger, errorName, invocationLogger, writesAt } from './internal/logger.js';
import { OPERATIONS } from './operations/index.js';
import { MAX_JSON_DEPTH, MAX_JSON_VALUES, plainJsonCopy, type NotPlainJson } from './internal/plain-json.js';
import type { JournalReading, OperationCall, OperationOutcome } from './operations/operation.js';
import { seqOf } from './operations/event-reader.js';
import { RunJournal, type FollowRead } from './journal/follower.js';
import { journalStoreOf, type JournalScope } from './journal/types.js';
import { Deliverer } from './outbox/deliverer.js';
import { createWebhookTargets } from './outbox/webhook.js';
import { deliveryStoreOf, type DeliveryQuery, type DeliveryRecord } from './outbox/types.js';
import { checkActionId, checkContext, checkIdempotencyKeyFormat, enforceGates } from './contract/policy.js';
import { CapabilityRegistry, capabilityId, implementationSupport, type CapabilityEntry } from './contract/registry.js';
import { describeSchemaErrors, schemaCatalog } from './contract/schemas.js';
import { InvocationTrace, Telemetry } from './telemetry.js';
import type {
  AipAction,
  AipActionResult,
  AipReceipt,
  DeliveriesOptions,
  EndpointOffer,
  ExecutionContext,
  HermesConnector,
  HermesConnectorOptions,
} from './types.js';

/** Validates the configuration (throwing ConnectorConfigError) and returns the connector; no I/O happens here. */
export function createHermesConnector(options: HermesConnectorOptions): HermesConnector {
  const config = resolveConfig(options);
  const registry = new CapabilityRegistry(config);
  const telemetry = new Telemetry(config.telemetry);
  const ownLedger = config.ledger === undefined ? createMemoryLedger() : undefined;
  const ledger = instrumentLedger(config.ledger ?? (ownLedger as RunLedger), telemetry);
  const logger = connectorLogger(config.logger);
  const openCalls = new OpenCalls();
  const pools = new EndpointPools(config.dispatcher);
  const deps: PipelineDeps = {
    config,
    registry,
    pools,
    offers: new EndpointOffers({ pools, openCalls, now: config.now }),
    logger,
    ledger,
    telemetry,
    guard: new IdempotencyGuard({
      ledger,
      now: config.now,
      leaseMs: config.idempotencyLeaseMs,
      onLedgerError: (error, stage) => logger.error({ err: errorName(error), stage }, 'run ledger failed'),
      onLateWrite: (write, outcome) =>
        outcome === 'written'
          ? logger.warn({ write }, 'run ledger write succeeded late')
          : logger.error({ write }, 'run ledger write given up: the claim is left to expire, and replays will answer outcome_unknown'),
    }),
    openCalls,
    journal: undefined,
    delivery: undefined,
  };
  const inFlight = new InFlight();
  const run = (action: unknown, context: unknown, hostCancellation: boolean, internal: InternalCall = CALLER) =>
    inFlight.track(invokePipeline(deps, action, context, hostCancellation, internal));
  deps.journal = startJournal(deps, (follow) => run(...followAction(deps, follow), false, { follower: true, onEventsLost: follow.onEventsLost }));
  deps.delivery = startDelivery(deps);

  return {
    id: 'hermes-agent',
    manifest: () => registry.manifest(),
    capabilities: () => registry.capabilities(),
    capability: (id) => registry.resolve(id)?.capability,
    implementationSupport: (id) => implementationSupport(registry.resolve(id)),
    invoke: (action, context) => run(action, context, false),
    cancel: (action, context) =>
      inFlight.track(
        (async () => {
          const plain = toPlainJson(action);
          // Only the run_stop built here carries the host's cancel authority; anything else goes
          // through the ordinary pipeline, which answers with its typed refusal.
          if (!plain.ok || !identifiable(plain.value, context)) return run(action, context, false);
          const plan = await stopActionFor(deps, plain.value, context).catch(() => ({ stop: undefined }));
          if (plan === null) return null;
          return plan.stop ? run(plan.stop, context, true) : run(plain.value, context, false);
        })(),
      ),
    evidence: async (actionIdOrRunId, options) => {
      const tenantId = evidenceTenant(options);
      // No ledger holds such an id (the pipeline refuses it), and PostgreSQL would reject the query.
      if (!storableOrNotText(actionIdOrRunId) || !storableOrNotText(tenantId)) return null;
      return ledger.evidence(actionIdOrRunId, tenantId);
    },
    reconcile: () => inFlight.track(reconcileOpenRuns(deps, (action, context) => run(action, context, false))),
    offers: () => inFlight.track(readOffers(deps)),
    deliveries: (runIdOrActionId, options) => listDeliveries(deps, runIdOrActionId, options),
    async close() {
      if (openCalls.closed) return;
      // Followers and deliverer stop before the calls are aborted: a read cut by the close below is then
      // left to the next owner (its lease lapses), never taken for the end of its run.
      const followersClosed = deps.journal?.followers.close();
      const deliveryClosed = deps.delivery?.close();
      openCalls.close();
      deps.guard.close();
      await deliveryClosed;
      await followersClosed;
      await inFlight.drained();
      await deps.guard.drained();
      await deps.pools.close();
      await ownLedger?.close();
    },
  };
}

interface PipelineDeps {
  config: ResolvedConfig;
  registry: CapabilityRegistry;
  pools: EndpointPools;
  offers: EndpointOffers;
  logger: Logger;
  ledger: RunLedger;
  telemetry: Telemetry;
  guard: IdempotencyGuard;
  openCalls: OpenCalls;
  /** The run event journal, when on: its followers, and what run_events reads. */
  journal: { followers: RunJournal; reading: JournalReading } | undefined;
  /** The outbox's delivery engine, when there are delivery targets. */
  delivery: Delivery | undefined;
}

/** How the connector calls itself: a journal follower reads Hermes, never the journal, and hears of lost events as they are found. */
interface InternalCall {
  follower?: boolean;
  onEventsLost?: OperationCall<unknown>['onEventsLost'];
}

/** An invocation by the connector's caller, not by the connector itself (one object for every call). */
const CALLER: InternalCall = {};

/** The journal's followers, started, when the journal is on. */
function startJournal(deps: PipelineDeps, read: (follow: FollowRead) => Promise<AipActionResult>): PipelineDeps['journal'] {
  const { journal: options, ledger } = deps.config;
  const store = journalStoreOf(ledger);
  if (!options || !store) return undefined;
  const followers = new RunJournal({ store, scopes: scopesOf(deps), options, now: deps.config.now, logger: deps.logger, read, seqOf });
  followers.start();
  return { followers, reading: { store, safetyRereadMs: options.leaseMs } };
}

/** The endpoints this connector can read, each with the tenant it serves: only their journals and deliveries are taken over. */
function scopesOf(deps: PipelineDeps): JournalScope[] {
  return deps.config.endpoints.map(({ id, tenantId }) => (tenantId === undefined ? { endpoint_id: id } : { endpoint_id: id, tenant_id: tenantId }));
}

/** The outbox's deliverer, and what closes it with the webhook targets' pools. */
interface Delivery {
  readonly deliverer: Deliverer;
  close(): Promise<void>;
}

/** The outbox's deliverer, started, when there are delivery targets (config validation made sure the journal is on). */
function startDelivery(deps: PipelineDeps): Delivery | undefined {
  const { delivery, ledger, now } = deps.config;
  const journal = journalStoreOf(ledger);
  const store = deliveryStoreOf(ledger);
  if (!delivery || !journal || !store || !deps.journal) return undefined;
  const webhooks = createWebhookTargets(delivery.webhooks, { dispatcher: deps.config.dispatcher, logger: deps.logger, now });
  const targets = [...webhooks.targets, ...delivery.targets];
  const deliverer = new Deliverer({ journal, store, targets, scopes: scopesOf(deps), options: delivery.options, now, logger: deps.logger });
  deliverer.start();
  return {
    deliverer,
    async close() {
      await deliverer.close();
      await webhooks.close();
    },
  };
}

const DEFAULT_DELIVERIES_LIMIT = 100;
const MAX_DELIVERIES_LIMIT = 1000;

/** deliveries(): the outbox's records of a run (named by run id, or by the action that started it), or of every run. */
async function listDeliveries(deps: PipelineDeps, runIdOrActionId: string | undefined, options: DeliveriesOptions | undefined): Promise<DeliveryRecord[]> {
  const store = deliveryStoreOf(deps.config.ledger);
  const query = deliveriesQuery(options);
  if (!deps.delivery || !store) return [];
  if (runIdOrActionId === undefined) return store.list(query);
  if (typeof runIdOrActionId !== 'string' || !isStorableId(runIdOrActionId)) throw new TypeError('deliveries(): the id must be a run id or an action id');
  const byRun = await store.list({ ...query, run_id: runIdOrActionId });
  if (byRun.length > 0) return byRun;
  const binding = await deps.ledger.evidence(runIdOrActionId, query.tenant_id);
  return binding?.action_id === runIdOrActionId ? store.list({ ...query, run_id: binding.run_id }) : [];
}

function deliveriesQuery(options: DeliveriesOptions | undefined): DeliveryQuery {
  const { tenantId, targetId, state, limit = DEFAULT_DELIVERIES_LIMIT } = options ?? {};
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_DELIVERIES_LIMIT)
    throw new TypeError(`deliveries(): \`limit\` must be an integer from 1 to ${MAX_DELIVERIES_LIMIT}`);
  if (state !== undefined && state !== 'pending' && state !== 'delivered' && state !== 'given_up') {
    throw new TypeError('deliveries(): `state` must be pending, delivered or given_up');
  }
  if (targetId !== undefined && (typeof targetId !== 'string' || !isStorableId(targetId))) throw new TypeError('deliveries(): `targetId` must be a target id');
  return {
    limit,
    ...(state === undefined ? {} : { state }),
    ...(targetId === undefined ? {} : { target_id: targetId }),
    ...(tenantId === undefined ? {} : { tenant_id: evidenceTenant({ tenantId }) as string | null }),
  };
}

/** The run_events action and context a follower reads a run with. */
function followAction(deps: PipelineDeps, follow: FollowRead): [AipAction, ExecutionContext] {
  const { key } = follow;
  const action: AipAction = {
    id: typedId('act_', deps.config.now()),
    capability_id: capabilityId(key.endpoint_id, 'run_events'),
    input:
      follow.resumeAfterSeq === undefined
        ? { run_id: key.run_id, max_events: follow.maxEvents }
        : { run_id: key.run_id, max_events: follow.maxEvents, last_seq: follow.resumeAfterSeq },
  };
  const context: ExecutionContext = { deadline: follow.deadline, signal: follow.signal, onChunk: follow.onChunk };
  if (key.tenant_id !== null) context.tenantId = key.tenant_id;
  return [action, context];
}

/** A run_start that Hermes accepted is followed when the journal is on: its journal exists before the caller hears of the run. */
async function journalStartedRun(
  journal: NonNullable<PipelineDeps['journal']>,
  delivery: Deliverer | undefined,
  admitted: AdmittedAction,
  result: AipActionResult,
): Promise<void> {
  const runId = (result.output as { run_id?: unknown } | undefined)?.run_id;
  if (admitted.entry.operation !== 'run_start' || result.status !== 'completed' || typeof runId !== 'string') return;
  const key = { tenant_id: admitted.context.tenantId ?? null, endpoint_id: admitted.entry.endpoint.id, run_id: runId };
  try {
    // The outbox's rows are created in the journal's transaction: nothing is sent on the start's path.
    if (await journal.followers.begin(key, delivery && ((now) => delivery.deliveriesFor(now)))) delivery?.begun(key);
  } catch (error) {
    // The create may have committed all the same (its answer lost): the next sweeps look.
    journal.followers.uncertain(key);
    delivery?.uncertain(key);
    admitted.logger.error({ err: errorName(error) }, 'run journal could not be created: the run is not followed');
  }
}

/** An action that passed validation and every gate: ready to reach Hermes. */
interface AdmittedAction {
  entry: CapabilityEntry;
  action: AipAction;
  input: Record<string, unknown>;
  context: ExecutionContext;
  deadline: number;
  logger: Logger;
  publisher: ChunkPublisher;
  startedAt: number;
  hostCancellation: boolean;
  trace: InvocationTrace;
  internal: InternalCall;
}

/**
 * The invoke pipeline, top to bottom: resolve the capability, validate the input, pass the
 * policy gates, then (once per idempotency key) let the operation talk to Hermes, validate
 * its output and shape the result. It never rejects: every failure becomes a result.
 */
async function invokePipeline(
  deps: PipelineDeps,
  rawAction: unknown,
  rawContext: unknown,
  hostCancellation: boolean,
  internal: InternalCall,
): Promise<AipActionResult> {
  const startedAt = deps.config.now();
  const plain = toPlainJson(rawAction);
  const actionId = actionIdOf(plain.ok ? plain.value : rawAction);
  const trace = new InvocationTrace(deps.telemetry, hostCancellation);
  const admission: Admission = { entry: undefined, input: undefined, publisher: new ChunkPublisher(actionId, undefined), logger: deps.logger, trace };
  let result: AipActionResult;
  try {
    if (!plain.ok) throw new HermesFailure('invalid_input', `The action is invalid: ${plain.why}`);
    const admitted = admit(deps, plain.value, rawContext, hostCancellation, internal, startedAt, admission);
    result = await trace.within(dispatchOnce, deps, admitted);
    if (deps.journal) await journalStartedRun(deps.journal, deps.delivery?.deliverer, admitted, result);
  } catch (error) {
    result = shapeResult(actionId, admission.entry, failedOutcome(error, false), undefined);
  }
  if (result.error && !admission.publisher.finished) await admission.publisher.finishWithError(result.error.code, result.error.message);
  recordFinished(deps, admission, result, startedAt);
  return result;
}

/** The invocation's last log line and the end of its span. */
function recordFinished(deps: PipelineDeps, { logger, trace, input }: Admission, result: AipActionResult, startedAt: number): void {
  // The bindings only when the line is written: most hosts do not log every invocation.
  if (writesAt(logger, 'info')) {
    logger.info(
      {
        status: result.status,
        code: result.error?.code,
        http_status: result.receipt?.http_status,
        replayed: result.receipt?.replayed,
        duration_ms: deps.config.now() - startedAt,
      },
      'hermes action finished',
    );
  }
  if (!trace.recording) return;
  trace.finish({
    status: result.status,
    errorCode: result.error?.code,
    uncertainOutcome: result.error?.details?.uncertain_outcome === true,
    replayed: result.receipt?.replayed === true,
    runId: runIdOf(input, result.output),
  });
}

/** How far admission got, for a failure's result and the invocation's span. */
interface Admission {
  entry?: CapabilityEntry;
  input?: unknown;
  publisher: ChunkPublisher;
  logger: Logger;
  trace: InvocationTrace;
}

/** The run an invocation concerns: named in its input, or started by it. */
function runIdOf(input: unknown, output: unknown): string | undefined {
  const named = (input as { run_id?: unknown } | undefined)?.run_id ?? (output as { run_id?: unknown } | undefined)?.run_id;
  return typeof named === 'string' ? named : undefined;
}

/** Validation and policy; throws HermesFailure. `admission` records how far it got, for the failure's result. */
function admit(
  deps: PipelineDeps,
  plainAction: unknown,
  rawContext: unknown,
  hostCancellation: boolean,
  internal: InternalCall,
  startedAt: number,
  admission: Admission,
): AdmittedAction {
  const action = checkAction(plainAction);
  checkActionId(action);
  const entry = deps.registry.resolve(action.capability_id);
  if (!entry) throw new HermesFailure('unsupported_capability', 'No capability of this connector has that id');
  admission.entry = entry;
  admission.trace.resolved(action.id, entry.capability.id, entry.endpoint.id, entry.operation);
  admission.logger = invocationLogger(deps.logger, action.id, entry.capability.id, entry.endpoint.id);
  const context = checkContext(rawContext);
  const { declaration } = entry.schemas;
  const deadline = context.deadline ?? startedAt + declaration.contract.sla.timeout_ms;
  if (declaration.http.streaming) {
    admission.publisher = new ChunkPublisher(action.id, context.onChunk, { signal: context.signal, openCalls: deps.openCalls, deadline, now: deps.config.now });
  }
  const input = checkInput(entry, action.input);
  // Only validated input reaches the invocation's span (its run id).
  admission.input = input;
  checkIdempotencyKeyFormat(action);
  enforceGates({ endpoint: entry.endpoint, declaration, action, context, now: startedAt, hostCancellation });
  admission.trace.admitted(context);
  return {
    entry,
    action,
    input,
    context,
    deadline,
    logger: admission.logger,
    publisher: admission.publisher,
    startedAt,
    hostCancellation,
    trace: admission.trace,
    internal,
  };
}

/** Operations whose contract requires a key reach Hermes at most once per (capability, key). */
function dispatchOnce(deps: PipelineDeps, admitted: AdmittedAction): Promise<AipActionResult> {
  const { entry, action } = admitted;
  if (entry.schemas.declaration.contract.idempotency.requirement !== 'required') return dispatch(deps, admitted, KEEP_EVIDENCE).then(resultOf);
  const fail = (failure: HermesFailure) => shapeResult(action.id, entry, failedOutcome(failure, true), undefined);
  const scope = { capability_id: entry.capability.id, idempotency_key: scopedKey(action.idempotency_key as string, admitted.context.tenantId) };
  return deps.guard
    .run({
      scope,
      input: action.input,
      actionId: action.id,
      deadline: admitted.deadline,
      signal: admitted.context.signal,
      execute: async () => {
        const refusal = await spendApproval(deps, admitted, scope);
        return refusal ? { result: fail(refusal) } : dispatch(deps, admitted, LEAVE_EVIDENCE_TO_GUARD);
      },
      fail,
      resendsAbandoned: resendsOn(deps, admitted),
    })
    .catch((error: unknown) => {
      // Only the ledger throws here, and only before the provider call: fail closed, nothing was sent.
      admitted.logger.error({ err: errorName(error) }, 'run ledger unavailable');
      return fail(new HermesFailure('ledger_unavailable', 'The run ledger could not be reached; the action was not sent'));
    });
}

/** Whether the endpoint, as it declares itself now, lets the operation send an abandoned call again (undefined: the operation never may). */
function resendsOn(deps: PipelineDeps, { entry, context }: AdmittedAction): (() => Promise<boolean>) | undefined {
  const resendable = OPERATIONS[entry.operation].resendableOn;
  if (!resendable) return undefined;
  return async () => resendable(await deps.offers.current(entry.endpoint, context.signal));
}

/**
 * Keys are per capability, and within it per verified tenant: on an endpoint shared by several
 * tenants, one tenant's key can never replay another tenant's result. (Keys are visible ASCII,
 * so the separator cannot occur in them.)
 */
function scopedKey(key: string, tenantId: string | undefined): string {
  return tenantId === undefined ? key : `${tenantId}\u001f${key}`;
}

/**
 * An AIP approval grant approves one action: the first (capability, key) to use it keeps it, and
 * only that action's replays and retries may present it again. Runs after the idempotency claim,
 * so a replay never gets here; a refusal leaves nothing sent and frees the key.
 */
async function spendApproval(deps: PipelineDeps, admitted: AdmittedAction, scope: IdempotencyScope): Promise<HermesFailure | undefined> {
  const { entry, action, context } = admitted;
  const grant = context.approval;
  if (!entry.schemas.declaration.contract.approval?.required || admitted.hostCancellation || !grant) return undefined;
  const use = {
    ...scope,
    tenant_id: context.tenantId ?? null,
    approval_id: grant.approvalId,
    action_id: action.id,
    used_at: deps.config.now(),
    expires_at: grant.expiresAt,
  };
  const standing = await deps.ledger.useGrant(use);
  if (standing.capability_id === scope.capability_id && standing.idempotency_key === scope.idempotency_key) return undefined;
  return new HermesFailure('approval_required', `\`${entry.operation}\` requires a valid AIP approval: this grant was already used by another action`, {
    details: { original_action_id: standing.action_id },
  });
}

/** Where a call's evidence goes: kept by dispatch() itself, or handed to the idempotency guard, which stores it with the record. */
const KEEP_EVIDENCE = true;
const LEAVE_EVIDENCE_TO_GUARD = false;
const resultOf = ({ result }: GuardedOutcome): AipActionResult => result;

/**
 * One provider call through the operation, its output checked; the result and the evidence, which
 * it keeps itself when asked (a call with no idempotency record to store it with: a failing ledger
 * is logged and the result still returned). Never throws.
 */
async function dispatch(deps: PipelineDeps, admitted: AdmittedAction, keepEvidence: boolean): Promise<GuardedOutcome> {
  const { config } = deps;
  const { entry, action } = admitted;
  let httpStatus: number | undefined;
  let outcome: OperationOutcome;
  try {
    const call: OperationCall = {
      endpoint: entry.endpoint,
      declaration: entry.schemas.declaration,
      action,
      input: admitted.input,
      context: admitted.context,
      deadline: admitted.deadline,
      config,
      pools: deps.pools,
      offers: deps.offers,
      openCalls: deps.openCalls,
      logger: admitted.logger,
      publisher: admitted.publisher,
      onHttpStatus: (status) => {
        httpStatus = status;
      },
      telemetry: deps.telemetry,
      traceContext: admitted.trace.context,
      journal: admitted.internal?.follower ? undefined : deps.journal?.reading,
      onEventsLost: admitted.internal?.onEventsLost,
    };
    outcome = checkOutput(entry, await OPERATIONS[entry.operation].execute(call), httpStatus);
  } catch (error) {
    outcome = failedOutcome(error, true);
  }
  // The endpoint may be back as another process, perhaps another release: read what it offers again.
  if (outcome.failure?.code === 'transport') deps.offers.forget(entry.endpoint.id);
  const completedAt = config.now();
  const receipt = receiptFor(action, entry, httpStatus, admitted.startedAt, completedAt, outcome.output);
  const result = shapeResult(action.id, entry, outcome, receipt);
  const evidence = evidenceOf(admitted, result, completedAt);
  if (!keepEvidence || !evidence) return { result, evidence };
  try {
    await ('bind' in evidence ? deps.ledger.recordRun(evidence.bind) : deps.ledger.updateRun(evidence.update, evidence.patch));
  } catch (error) {
    admitted.logger.error({ err: errorName(error) }, 'run ledger failed to keep evidence');
  }
  return { result, evidence: undefined };
}

/** What the result tells the ledger: a started run's binding, or news about a bound run. */
function evidenceOf({ entry, action, input, context }: AdmittedAction, result: AipActionResult, now: number): EvidenceWrite | undefined {
  const operation = OPERATIONS[entry.operation];
  const source = { endpoint: entry.endpoint, capabilityId: entry.capability.id, actionId: action.id, input, context, result, now };
  const binding = operation.bindRun?.(source);
  if (binding) return { bind: binding };
  const patch = operation.learnAboutRun?.(source);
  const run = { run_id: (input as { run_id: string }).run_id, endpoint_id: entry.endpoint.id, tenant_id: context.tenantId ?? null };
  return patch ? { update: run, patch } : undefined;
}

/** reconcile(): one status read per open binding; the pipeline records what it learns (404 → evidence lost). */
async function reconcileOpenRuns(
  deps: PipelineDeps,
  invoke: (action: AipAction, context: ExecutionContext) => Promise<AipActionResult>,
): Promise<RunEvidence[]> {
  const reconciled: RunEvidence[] = [];
  for (const binding of await deps.ledger.openRuns()) {
    const statusCapability = capabilityId(binding.endpoint_id, 'run_status');
    if (!deps.registry.resolve(statusCapability)) continue; // the endpoint is no longer configured
    await invoke(
      { id: typedId('act_', deps.config.now()), capability_id: statusCapability, input: { run_id: binding.run_id } },
      binding.tenant_id === null ? {} : { tenantId: binding.tenant_id },
    );
    const updated = await deps.ledger.evidence(binding.action_id, binding.tenant_id);
    if (updated) reconciled.push(updated);
  }
  return reconciled;
}

/** offers(): every configured endpoint's declaration, read where it was not yet. */
async function readOffers(deps: PipelineDeps): Promise<Record<string, EndpointOffer>> {
  const { endpoints } = deps.config;
  const offers = await Promise.all(endpoints.map((endpoint) => deps.offers.of(endpoint)));
  return Object.fromEntries(endpoints.map((endpoint, index) => [endpoint.id, offers[index] as EndpointOffer]));
}

let actionValidator: ValidateFunction | undefined;
const validateAction = () => (actionValidator ??= schemaCatalog().validator('aip/action.schema.json'));

/**
 * The action as plain JSON data, as it would arrive in an AIP envelope. Everything after this
 * reads the copy, so getters that throw, proxies, cycles, BigInts and boxed strings can neither
 * crash the pipeline nor show one value to a check and another to the operation.
 */
function toPlainJson(value: unknown): { ok: true; value: unknown } | { ok: false; why: string } {
  try {
    return { ok: true, value: plainJsonCopy(value) };
  } catch (error) {
    return { ok: false, why: NOT_PLAIN_JSON[(error as NotPlainJson).reason] };
  }
}

const NOT_PLAIN_JSON: Record<NotPlainJson['reason'], string> = {
  not_json: 'it is not plain JSON data',
  too_deep: `it is nested more than ${MAX_JSON_DEPTH} levels deep`,
  too_large: `it holds more than ${MAX_JSON_VALUES} values`,
};

function checkAction(action: unknown): AipAction {
  const validate = validateAction();
  if (!validate(action)) throw new HermesFailure('invalid_input', `The action is invalid: ${describeSchemaErrors(validate.errors)}`);
  return action as AipAction;
}

function checkInput(entry: CapabilityEntry, input: unknown): Record<string, unknown> {
  const { validateInput } = entry.schemas;
  if (!validateInput(input)) {
    throw new HermesFailure('invalid_input', `Input for \`${entry.operation}\` is invalid: ${describeSchemaErrors(validateInput.errors)}`);
  }
  OPERATIONS[entry.operation].checkInput?.(input);
  return input as Record<string, unknown>;
}

/** A provider answer that does not match the operation's output schema is not passed on as a success. */
function checkOutput(entry: CapabilityEntry, outcome: OperationOutcome, httpStatus: number | undefined): OperationOutcome {
  const { output } = outcome;
  if (output === undefined || entry.schemas.validateOutput(OPERATIONS[entry.operation].checkedOutput?.(output) ?? output)) return outcome;
  const failure = new HermesFailure(
    'invalid_response',
    `Hermes endpoint \`${entry.endpoint.id}\` answered \`${entry.operation}\` with an unexpected shape: ${describeSchemaErrors(entry.schemas.validateOutput.errors)}`,
    { effect: 'maybe', remoteStatus: httpStatus },
  );
  return { status: 'failed', failure };
}

function failedOutcome(error: unknown, dispatched: boolean): OperationOutcome {
  const failure =
    error instanceof HermesFailure
      ? error
      : new HermesFailure('internal', 'The connector failed unexpectedly while handling this action', { effect: dispatched ? 'maybe' : 'none' });
  return { status: failure.code === 'cancelled' ? 'cancelled' : 'failed', failure };
}

function shapeResult(actionId: string, entry: CapabilityEntry | undefined, outcome: OperationOutcome, receipt: AipReceipt | undefined): AipActionResult {
  const result: AipActionResult = { action_id: actionId, status: outcome.status };
  if (outcome.output !== undefined) result.output = outcome.output;
  if (outcome.message) result.message = outcome.message;
  if (receipt) result.receipt = receipt;
  if (outcome.failure) result.error = toProtocolError(outcome.failure, entry?.endpoint.id, entry?.operation);
  return result;
}

function receiptFor(
  action: AipAction,
  entry: CapabilityEntry,
  httpStatus: number | undefined,
  startedAt: number,
  completedAt: number,
  output: unknown,
): AipReceipt {
  const receipt: AipReceipt = {
    receipt_id: typedId('rcpt_', completedAt),
    capability_id: entry.capability.id,
    endpoint_id: entry.endpoint.id,
    operation: entry.operation,
    started_at: isoTimestamp(startedAt),
    completed_at: isoTimestamp(completedAt),
  };
  if (httpStatus !== undefined) receipt.http_status = httpStatus;
  if (action.idempotency_key) receipt.idempotency_key = action.idempotency_key;
  // A Hermes that honours keys says when it answered from its own record rather than starting anew.
  if ((output as { replayed?: unknown } | undefined)?.replayed === true) Object.assign(receipt, { replayed: true, replayed_by: 'provider' });
  return receipt;
}

/** evidence()'s tenant: a string or null (no tenant) selects that tenant; absent, every tenant. */
function evidenceTenant(options: { tenantId?: string | null } | undefined): string | null | undefined {
  const tenantId = options?.tenantId;
  if (tenantId === undefined || tenantId === null || (typeof tenantId === 'string' && tenantId !== '')) return tenantId;
  throw new TypeError('evidence(): `tenantId` must be a non-empty string or null');
}

/** 10000-01-01T00:00:00.000Z: past it toISOString writes a six-digit year. */
const YEAR_10000_MS = 253_402_300_800_000;
/** `000Z` to `999Z`: the end of a timestamp, per millisecond. */
const MILLIS_Z = Array.from({ length: 1000 }, (_, milli) => `${String(milli).padStart(3, '0')}Z`);
let isoSecond = Number.NaN;
let isoSecondPrefix = '';

/**
 * `new Date(ms).toISOString()`, without building a Date for every receipt: on Node 20 each
 * toISOString costs microseconds, two per invocation. The text up to the seconds is cached per
 * second, so a timestamp is that prefix and one of 1,000 suffixes (no string built per part);
 * anything but a whole ms in years 1970-9999 goes to toISOString itself.
 */
function isoTimestamp(ms: number): string {
  if (!Number.isInteger(ms) || ms < 0 || ms >= YEAR_10000_MS) return new Date(ms).toISOString();
  const second = Math.floor(ms / 1000);
  if (second !== isoSecond) {
    isoSecond = second;
    isoSecondPrefix = new Date(second * 1000).toISOString().slice(0, 20);
  }
  return isoSecondPrefix + (MILLIS_Z[ms - second * 1000] as string);
}

/** The action's id for the result, read defensively: even a hostile action gets a result. */
function actionIdOf(action: unknown): string {
  try {
    const id = (action as { id?: unknown } | null)?.id;
    return typeof id === 'string' ? id : '';
  } catch {
    return '';
  }
}

/**
 * cancel(): the host's cancel authority turns an admitted action into `run_stop` for the run
 * its input names, or for the run a `run_start` action started (from the ledger). Unknown
 * capabilities still get a typed result; nothing to stop means null.
 */
async function stopActionFor(deps: PipelineDeps, action: unknown, context: ExecutionContext | undefined): Promise<{ stop: AipAction | undefined } | null> {
  const candidate = action as Partial<AipAction> | null;
  const entry = deps.registry.resolve(candidate?.capability_id);
  if (!entry) return { stop: undefined };
  const tenantId = context?.tenantId;
  const target = await runToStop(deps, entry, candidate, tenantId);
  if (target === undefined) return null;
  const stop: AipAction = {
    id: actionIdOf(action),
    capability_id: deps.registry.sibling(entry, 'run_stop').capability.id,
    input: { run_id: target.runId },
    idempotency_key: `aip-cancel-${createHash('sha256').update(actionIdOf(action)).digest('hex').slice(0, 40)}`,
  };
  if (Array.isArray(candidate?.delegation_chain)) stop.delegation_chain = candidate.delegation_chain;
  // A finished run has nothing to stop, unless this cancel already asked Hermes: then it is answered as before.
  if (target.finished && !(await stopAlreadyAsked(deps, stop, tenantId))) return null;
  return { stop };
}

/** Whether the ledger holds this stop's key (its first attempt, settled or still in flight); a failing ledger counts as yes. */
async function stopAlreadyAsked(deps: PipelineDeps, stop: AipAction, tenantId: string | undefined): Promise<boolean> {
  const scope = { capability_id: stop.capability_id, idempotency_key: scopedKey(stop.idempotency_key as string, tenantId) };
  return deps.ledger.get(scope, deps.config.now()).then(
    (record) => record !== undefined,
    () => true,
  );
}

/** The run a cancel is about, and whether the tenant's ledger binding already records its end. */
async function runToStop(
  deps: PipelineDeps,
  entry: CapabilityEntry,
  action: Partial<AipAction> | null,
  tenantId: string | undefined,
): Promise<{ runId: string; finished: boolean } | undefined> {
  const runId = (action?.input as { run_id?: unknown } | null | undefined)?.run_id;
  if (typeof runId === 'string') return { runId, finished: await knownFinished(deps, entry, runId, tenantId) };
  if (OPERATIONS[entry.operation].bindRun === undefined || typeof action?.id !== 'string') return undefined;
  try {
    // A replayed start has no binding of its own: its idempotency record names the action that started the run.
    const record =
      typeof action.idempotency_key === 'string'
        ? await deps.ledger.get({ capability_id: entry.capability.id, idempotency_key: scopedKey(action.idempotency_key, tenantId) }, deps.config.now())
        : undefined;
    for (const actionId of new Set([action.id, record?.action_id])) {
      if (actionId === undefined) continue;
      const binding = await deps.ledger.evidence(actionId, tenantId ?? null);
      if (binding?.action_id === actionId && binding.endpoint_id === entry.endpoint.id) return { runId: binding.run_id, finished: isSettled(binding) };
    }
  } catch (error) {
    deps.logger.error({ err: errorName(error) }, 'run ledger failed while looking up the run to cancel');
  }
  return undefined;
}

/**
 * Whether the ledger already holds this tenant's terminal outcome for the run: then there is
 * nothing to stop (Hermes would refuse with a 404). Unknown runs, and a ledger that fails, are
 * stopped as asked.
 */
async function knownFinished(deps: PipelineDeps, entry: CapabilityEntry, runId: string, tenantId: string | undefined): Promise<boolean> {
  try {
    const binding = await deps.ledger.evidence(runId, tenantId ?? null);
    return binding !== null && binding.run_id === runId && binding.endpoint_id === entry.endpoint.id && isSettled(binding);
  } catch (error) {
    deps.logger.error({ err: errorName(error) }, 'run ledger failed while looking up the run to cancel');
    return false;
  }
}

/** Whether cancel() can look the action up in the ledger: an action id or tenant no ledger could hold goes to the pipeline's refusal instead. */
function identifiable(action: unknown, context: ExecutionContext | undefined): boolean {
  try {
    checkActionId(action as { id?: unknown });
    return storableOrNotText(context?.tenantId);
  } catch {
    return false;
  }
}

function storableOrNotText(value: unknown): boolean {
  return typeof value !== 'string' || isStorableId(value);
}
