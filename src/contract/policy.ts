import { canonicalJson } from '../internal/canonical-json.js';
import type { ResolvedEndpoint } from '../config.js';
import { HermesFailure } from '../failures.js';
import { isStorableId } from '../internal/ids.js';
import { isValidIdempotencyKey } from '../transport/headers.js';
import type { OperationDeclaration } from './schemas.js';
import type { AipAction, ApprovalGrant, ExecutionContext } from '../types.js';

/** The contract's approval window; a grant may not outlive it. */
const DEFAULT_APPROVAL_TTL_MS = 15 * 60 * 1000;

export interface GateInput {
  endpoint: ResolvedEndpoint;
  declaration: OperationDeclaration;
  action: AipAction;
  context: ExecutionContext;
  now: number;
  /** cancel() stands in for the approval with the host's own cancel authority. */
  hostCancellation: boolean;
}

/** Every policy gate, in order; each failure is thrown before any provider request. */
export function enforceGates(input: GateInput): void {
  enforceTenant(input);
  enforceCredential(input);
  enforceIdempotencyKey(input);
  if (!input.hostCancellation) enforceReadableApproval(input);
  enforceTime(input);
}

/** Checks the trusted context's shape: a malformed context is refused, not guessed at. */
export function checkContext(context: unknown): ExecutionContext {
  try {
    return checkContextFields(context);
  } catch (error) {
    if (error instanceof HermesFailure) throw error;
    throw invalidContext('it cannot be read (a field threw)');
  }
}

function checkContextFields(context: unknown): ExecutionContext {
  if (context === undefined) return {};
  if (typeof context !== 'object' || context === null || Array.isArray(context)) throw invalidContext('must be an object');
  const c = context as Record<string, unknown>;
  for (const field of ['tenantId', 'traceId', 'sessionId'] as const) {
    if (c[field] !== undefined && typeof c[field] !== 'string') throw invalidContext(`${field} must be a string`);
  }
  // The ledger stores "no tenant" as the empty scope: an empty tenant id would share it.
  if (c.tenantId === '') throw invalidContext('tenantId must not be empty');
  for (const field of ['tenantId', 'sessionId'] as const) {
    if (c[field] !== undefined && !isStorableId(c[field] as string)) throw invalidContext(`${field} ${NOT_STORABLE}`);
  }
  const approvalId = readableApprovalId(c.approval);
  if (typeof approvalId === 'string' && !isStorableId(approvalId)) throw invalidContext(`the approval's approvalId ${NOT_STORABLE}`);
  if (c.actor !== undefined) {
    const actor = c.actor as Record<string, unknown> | null;
    if (
      typeof actor !== 'object' ||
      actor === null ||
      typeof actor.principalId !== 'string' ||
      (actor.issuer !== undefined && typeof actor.issuer !== 'string')
    ) {
      throw invalidContext('actor must be { principalId: string, issuer?: string }');
    }
  }
  if (c.deadline !== undefined && (typeof c.deadline !== 'number' || !Number.isFinite(c.deadline))) throw invalidContext('deadline must be epoch milliseconds');
  if (c.signal !== undefined && !(c.signal instanceof AbortSignal)) throw invalidContext('signal must be an AbortSignal');
  if (c.onChunk !== undefined && typeof c.onChunk !== 'function') throw invalidContext('onChunk must be a function');
  return c as ExecutionContext;
}

const NOT_STORABLE = 'must be well-formed Unicode without NUL characters (the run ledger could not store it as given)';

/** The action id is stored in the ledger as given, so it must be text every ledger holds exactly. */
export function checkActionId(action: { id?: unknown }): void {
  if (typeof action.id === 'string' && !isStorableId(action.id)) throw new HermesFailure('invalid_input', `The action id ${NOT_STORABLE}`);
}

/** Checks the AIP envelope fields the connector relies on, beyond the action schema. */
export function checkIdempotencyKeyFormat(action: AipAction): void {
  const key = action.idempotency_key;
  if (key !== undefined && key !== '' && !isValidIdempotencyKey(key)) {
    throw new HermesFailure('invalid_input', 'The idempotency key must be 1-255 visible ASCII characters');
  }
}

function enforceTenant({ endpoint, context }: GateInput): void {
  if (endpoint.tenantId === undefined || context.tenantId === endpoint.tenantId) return;
  throw new HermesFailure(
    'tenant_mismatch',
    context.tenantId === undefined
      ? `Endpoint \`${endpoint.id}\` is bound to a tenant and the execution context has no verified tenant`
      : `Endpoint \`${endpoint.id}\` is bound to another tenant than the execution context's`,
  );
}

function enforceCredential({ endpoint }: GateInput): void {
  if (endpoint.apiKey === undefined) {
    throw new HermesFailure('missing_credential', `Endpoint \`${endpoint.id}\` has no API key configured`);
  }
}

function enforceIdempotencyKey({ declaration, action }: GateInput): void {
  if (declaration.contract.idempotency.requirement !== 'required') return;
  if (action.idempotency_key === undefined || action.idempotency_key === '') {
    throw new HermesFailure('idempotency_key_required', `\`${declaration.operation}\` requires an idempotency key`);
  }
}

function enforceReadableApproval(input: GateInput): void {
  try {
    enforceApproval(input);
  } catch (error) {
    if (error instanceof HermesFailure) throw error;
    throw new HermesFailure('approval_required', `\`${input.declaration.operation}\` requires a valid AIP approval: the grant cannot be read`);
  }
}

function enforceApproval({ declaration, action, context, now }: GateInput): void {
  const approval = declaration.contract.approval;
  if (!approval?.required) return;
  const refuse = (why: string) => new HermesFailure('approval_required', `\`${declaration.operation}\` requires a valid AIP approval: ${why}`);
  const grant = context.approval as Partial<ApprovalGrant> | undefined;
  if (grant === undefined || grant === null || typeof grant !== 'object') throw refuse('no approval grant in the execution context');
  if (typeof grant.approvalId !== 'string' || grant.approvalId === '') throw refuse('the grant has no approvalId');
  if (grant.decision !== 'approved') throw refuse('the grant does not approve the action');
  const { grantedAt, expiresAt } = grant;
  if (!isFiniteNumber(grantedAt) || !isFiniteNumber(expiresAt)) throw refuse('the grant has no valid grantedAt/expiresAt');
  if (grantedAt > now) throw refuse('the grant is not valid yet');
  if (expiresAt <= now) throw refuse('the grant has expired');
  if (expiresAt - grantedAt > (approval.ttl_ms ?? DEFAULT_APPROVAL_TTL_MS)) throw refuse('the grant is valid for longer than the contract allows');
  const evidence = grant.evidence as Partial<ApprovalGrant['evidence']> | undefined;
  if (evidence === undefined || evidence === null || typeof evidence !== 'object') throw refuse('the grant carries no evidence');
  if (typeof evidence.reason !== 'string' || evidence.reason.trim() === '') throw refuse('the evidence has no reason');
  if (evidence.policyDecision === undefined || evidence.policyDecision === null) throw refuse('the evidence has no policy decision');
  if (!('inputSnapshot' in evidence) || !sameJson(evidence.inputSnapshot, action.input)) {
    throw refuse('the evidence input snapshot differs from the action input');
  }
}

function enforceTime({ context, now }: GateInput): void {
  if (context.signal?.aborted) throw new HermesFailure('cancelled', 'The action was cancelled before it was sent');
  if (context.deadline !== undefined && context.deadline <= now) {
    throw new HermesFailure('deadline_exceeded', 'The AIP deadline passed before the action was sent');
  }
}

/** Structural JSON equality; a value that is not JSON data (a cycle, a BigInt) equals nothing. */
function sameJson(a: unknown, b: unknown): boolean {
  try {
    return canonicalJson(a) === canonicalJson(b);
  } catch {
    return false;
  }
}

/** The grant's approvalId if it can be read; a grant that cannot is refused later as the approval gate's own failure. */
function readableApprovalId(approval: unknown): unknown {
  try {
    return (approval as { approvalId?: unknown } | null | undefined)?.approvalId;
  } catch {
    return undefined;
  }
}

function invalidContext(why: string): HermesFailure {
  return new HermesFailure('invalid_input', `The execution context is invalid: ${why}`);
}

function isFiniteNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}
