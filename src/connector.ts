import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { ChunkPublisher } from './chunks.js';
import { resolveConfig, type ResolvedConfig } from './config.js';
import { HermesFailure, toProtocolError } from './failures.js';
import { EndpointPools } from './http.js';
import { typedId } from './ids.js';
import { connectorLogger, invocationLogger } from './logger.js';
import { OPERATIONS } from './operations/index.js';
import type { OperationCall, OperationOutcome } from './operations/operation.js';
import { checkContext, checkIdempotencyKeyFormat, enforceGates } from './policy.js';
import { CapabilityRegistry, implementationSupport, type CapabilityEntry } from './registry.js';
import { describeSchemaErrors, schemaCatalog } from './schemas.js';
import type { AipAction, AipActionResult, AipReceipt, HermesConnector, HermesConnectorOptions } from './types.js';

/** Validates the configuration (throwing ConnectorConfigError) and returns the connector; no I/O happens here. */
export function createHermesConnector(options: HermesConnectorOptions): HermesConnector {
  const config = resolveConfig(options);
  const registry = new CapabilityRegistry(config);
  const pools = new EndpointPools(config.dispatcher);
  const logger = connectorLogger(config.logger);
  const lifetime = new AbortController();
  const inFlight = new Set<Promise<AipActionResult>>();

  const track = (result: Promise<AipActionResult>): Promise<AipActionResult> => {
    inFlight.add(result);
    void result.finally(() => inFlight.delete(result));
    return result;
  };
  const run = (action: unknown, context: unknown, hostCancellation: boolean) =>
    track(invokePipeline({ config, registry, pools, logger, closeSignal: lifetime.signal }, action, context, hostCancellation));

  return {
    id: 'hermes-agent',
    manifest: () => registry.manifest(),
    capabilities: () => registry.capabilities(),
    capability: (id) => registry.resolve(id)?.capability,
    implementationSupport: (id) => implementationSupport(registry.resolve(id)),
    invoke: (action, context) => run(action, context, false),
    async cancel(action, context) {
      const stop = stopActionFor(registry, action);
      return stop === null ? null : run(stop, context, true);
    },
    async close() {
      if (lifetime.signal.aborted) return;
      lifetime.abort();
      await Promise.allSettled([...inFlight]);
      await pools.close();
    },
  };
}

interface PipelineDeps {
  config: ResolvedConfig;
  registry: CapabilityRegistry;
  pools: EndpointPools;
  logger: Logger;
  closeSignal: AbortSignal;
}

/**
 * The invoke pipeline, top to bottom: resolve the capability, validate the input, pass the
 * policy gates, let the operation talk to Hermes, validate its output, shape the result.
 * It never rejects: every failure becomes a result.
 */
async function invokePipeline(deps: PipelineDeps, rawAction: unknown, rawContext: unknown, hostCancellation: boolean): Promise<AipActionResult> {
  const { config, registry } = deps;
  const startedAt = config.now();
  const actionId = actionIdOf(rawAction);
  let entry: CapabilityEntry | undefined;
  let publisher = new ChunkPublisher(actionId, undefined);
  let logger = deps.logger;
  let httpStatus: number | undefined;
  let dispatched = false;
  let outcome: OperationOutcome;
  try {
    const action = checkAction(rawAction);
    entry = registry.resolve(action.capability_id);
    if (!entry) throw new HermesFailure('unsupported_capability', 'No capability of this connector has that id');
    logger = invocationLogger(deps.logger, { action_id: actionId, capability_id: entry.capability.id, endpoint_id: entry.endpoint.id });
    const context = checkContext(rawContext);
    if (entry.schemas.declaration.http.streaming) publisher = new ChunkPublisher(actionId, context.onChunk);
    const input = checkInput(entry, action.input);
    checkIdempotencyKeyFormat(action);
    enforceGates({ endpoint: entry.endpoint, declaration: entry.schemas.declaration, action, context, now: config.now(), hostCancellation });
    dispatched = true;
    const call: OperationCall = {
      endpoint: entry.endpoint,
      declaration: entry.schemas.declaration,
      action,
      input,
      context,
      deadline: context.deadline ?? startedAt + entry.schemas.declaration.contract.sla.timeout_ms,
      config,
      pools: deps.pools,
      closeSignal: deps.closeSignal,
      logger,
      publisher,
      onHttpStatus: (status) => {
        httpStatus = status;
      },
    };
    outcome = checkOutput(entry, await OPERATIONS[entry.operation].execute(call), httpStatus);
  } catch (error) {
    outcome = failedOutcome(error, dispatched);
  }
  const result = shapeResult(actionId, entry, outcome, dispatched ? receiptFor(rawAction as AipAction, entry, httpStatus, startedAt, config.now()) : undefined);
  if (result.error && !publisher.finished) await publisher.finishWithError(result.error.code, result.error.message);
  logger.info({ status: result.status, code: result.error?.code, http_status: httpStatus, duration_ms: config.now() - startedAt }, 'hermes action finished');
  return result;
}

const validateAction = () => schemaCatalog().validator('aip/action.schema.json');

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
  if (outcome.output === undefined || entry.schemas.validateOutput(outcome.output)) return outcome;
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

function receiptFor(action: AipAction, entry: CapabilityEntry | undefined, httpStatus: number | undefined, startedAt: number, completedAt: number): AipReceipt | undefined {
  if (!entry) return undefined;
  const receipt: AipReceipt = {
    receipt_id: typedId('rcpt_', completedAt),
    capability_id: entry.capability.id,
    endpoint_id: entry.endpoint.id,
    operation: entry.operation,
    started_at: new Date(startedAt).toISOString(),
    completed_at: new Date(completedAt).toISOString(),
  };
  if (httpStatus !== undefined) receipt.http_status = httpStatus;
  if (action.idempotency_key) receipt.idempotency_key = action.idempotency_key;
  return receipt;
}

function actionIdOf(action: unknown): string {
  const id = (action as { id?: unknown } | null)?.id;
  return typeof id === 'string' ? id : '';
}

/**
 * cancel(): the host's cancel authority turns an admitted action into `run_stop` for the
 * run its input names. Unknown capabilities still get a typed result; no run_id means
 * there is nothing to stop.
 */
function stopActionFor(registry: CapabilityRegistry, action: unknown): unknown {
  const candidate = action as Partial<AipAction> | null;
  const entry = registry.resolve(candidate?.capability_id);
  if (!entry) return action;
  const runId = (candidate?.input as { run_id?: unknown } | null | undefined)?.run_id;
  if (typeof runId !== 'string') return null;
  const stop: AipAction = {
    id: actionIdOf(action),
    capability_id: registry.sibling(entry, 'run_stop').capability.id,
    input: { run_id: runId },
    idempotency_key: `aip-cancel-${createHash('sha256').update(actionIdOf(action)).digest('hex').slice(0, 40)}`,
  };
  if (Array.isArray(candidate?.delegation_chain)) stop.delegation_chain = candidate.delegation_chain;
  return stop;
}

