/**
 * An admitted action or cancel, executed through the connector with the verified context the
 * reference host builds (tenant and identity from the host's static binding, never from payload
 * claims), and the connector's typed result as a wire `action_result` the reference types keep
 * byte for byte.
 */
import type { AipAction, AipActionResult, AipProtocolError, ApprovalGrant, ExecutionContext, HermesConnector } from '../types.js';
import { asObject } from './checks.js';
import { inFieldOrder } from './wire/envelope.js';

/** Who the connector acts for on this host: the host's tenant, and the gateway as the actor. */
export interface ExecutionBinding {
  connector: HermesConnector;
  tenantId: string;
  gatewayPrincipalId: string;
  trustDomain: string;
  now: () => number;
}

/** Where the request came from: its trace, session and correlation. */
export interface RequestOrigin {
  traceId: string | undefined;
  sessionId: string | undefined;
}

/**
 * The action as the connector receives it: async arrives as sync (the central runtime owns
 * queuing, so this hop always executes synchronously), the callback is the host's business, and
 * identity claims are replaced by the verified tenant.
 */
export function connectorAction(action: Record<string, unknown>, tenantId: string): AipAction {
  const { callback: _callback, identity: _claims, ...rest } = action;
  const forwarded = { ...rest, identity: { tenant: { id: tenantId } } } as unknown as AipAction;
  if (forwarded.mode === 'async') forwarded.mode = 'sync';
  return forwarded;
}

/** The action's own `timeout_ms`, bounded by its capability's contract timeout (the contract's alone when absent). */
export function actionDeadline(connector: HermesConnector, action: Record<string, unknown>, now: number): number | undefined {
  const contract = asObject(connector.capability(String(action.capability_id))?.contract);
  const contractTimeout = asObject(contract?.sla)?.timeout_ms;
  const requested = typeof action.timeout_ms === 'number' && action.timeout_ms > 0 ? action.timeout_ms : undefined;
  if (typeof contractTimeout !== 'number') return requested === undefined ? undefined : now + requested;
  return now + Math.min(requested ?? contractTimeout, contractTimeout);
}

export function executionContext(
  binding: ExecutionBinding,
  origin: RequestOrigin,
  extra: { deadline: number | undefined; signal: AbortSignal; approval?: ApprovalGrant; onChunk?: ExecutionContext['onChunk'] },
): ExecutionContext {
  const context: ExecutionContext = {
    tenantId: binding.tenantId,
    actor: { principalId: binding.gatewayPrincipalId, issuer: binding.trustDomain },
    signal: extra.signal,
  };
  if (origin.traceId !== undefined) context.traceId = origin.traceId;
  if (origin.sessionId !== undefined) context.sessionId = origin.sessionId;
  if (extra.deadline !== undefined) context.deadline = extra.deadline;
  if (extra.approval !== undefined) context.approval = extra.approval;
  if (extra.onChunk !== undefined) context.onChunk = extra.onChunk;
  return context;
}

/** Text the cancel of an action with nothing to stop answers (the connector's `null`). */
export const NOTHING_TO_STOP = 'nothing to stop: no run of this action is in progress';

/** Logged when a cancel waits for an execution it must not abort (see `abortable`). */
export const CANCEL_WAITS_FOR_START = 'cancel waits for Hermes to answer the start, to stop the run it names';

/**
 * Whether a cancel may abort an action executing here. Not a write whose input names no run (a
 * run_start): only Hermes' answer to it names the run it started, so aborted on its way, the run
 * would go on with its id lost and nobody to stop it. Such an execution is let finish (its own
 * deadline bounds it) and the run it started is then stopped.
 */
export function abortable(connector: HermesConnector, action: AipAction): boolean {
  const sideEffects = asObject(connector.capability(action.capability_id)?.contract)?.side_effects;
  const writes = Array.isArray(sideEffects) && sideEffects.includes('write');
  return !writes || typeof asObject(action.input)?.run_id === 'string';
}

/** What the result of a start a cancel waited for adds: what the cancel then did (undefined: the cancel failed). */
export function stoppedAfterStartNote(stop: AipActionResult | undefined): string {
  const prefix = 'cancelled while Hermes was starting this run';
  const output = asObject(stop?.output);
  if (stop?.status === 'completed' && typeof output?.run_id === 'string') {
    return `${prefix}: run ${output.run_id} was stopped once Hermes answered (${String(output.status)})`;
  }
  if (stop?.status === 'completed') return `${prefix}: ${NOTHING_TO_STOP}`;
  return `${prefix}: stopping its run failed (${stop?.error?.code ?? 'the cancel failed'})`;
}

/**
 * A cancel through `connector.cancel`: the action as the host admitted it when it is known here,
 * else its id and routed capability (the connector finds a started run in its ledger). `null`
 * (nothing to stop) answers a completed `action_result` saying so.
 */
export async function cancelThroughConnector(
  binding: ExecutionBinding,
  known: AipAction | undefined,
  target: { actionId: string; capabilityId: string },
  context: ExecutionContext,
): Promise<AipActionResult> {
  const action = known ?? { id: target.actionId, capability_id: target.capabilityId, input: {} };
  const result = await binding.connector.cancel(action, context);
  return result ?? { action_id: target.actionId, status: 'completed', message: [{ type: 'text', text: NOTHING_TO_STOP }] };
}

const RESULT_FIELDS = ['action_id', 'status', 'output', 'message', 'error'] as const;
const ERROR_FIELDS = ['code', 'message', 'category', 'retryable', 'retry_after_ms', 'details', 'source'] as const;

/**
 * The connector's result as the reference `ActionResult`: its fields in declaration order, an
 * empty message list omitted, and no receipt (the reference's is a `ReceiptRef {id, hash}` of a
 * signed receipt, which the connector's evidence receipt is not; it stays in the host's log).
 */
export function wireActionResult(result: AipActionResult, notes: string[] = []): Record<string, unknown> {
  const message = [...(result.message ?? []), ...notes.map((text) => ({ type: 'text' as const, text }))];
  return inFieldOrder<Record<string, unknown>>(
    {
      action_id: result.action_id,
      status: result.status,
      output: result.output,
      message: message.length > 0 ? message : undefined,
      error: result.error === undefined ? undefined : wireError(result.error),
    },
    RESULT_FIELDS,
  );
}

function wireError(error: AipProtocolError): Record<string, unknown> {
  return inFieldOrder<Record<string, unknown>>({ ...error }, ERROR_FIELDS);
}
