import { randomBytes } from 'node:crypto';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { ElicitRequestFormParams, RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { ApprovalGrant } from '../types.js';
import type { HermesTool } from './tools.js';

/** The contract's approval window (`approval.ttl_ms`): a grant made here never outlives it. */
export const APPROVAL_WINDOW_MS = 15 * 60 * 1000;
/** How long the person has to answer the form; after that the call is refused as not approved. */
const ANSWER_TIMEOUT_MS = 10 * 60 * 1000;

export type ApprovalOutcome =
  | { approved: true; grant: ApprovalGrant }
  | { approved: false; why: 'disabled' | 'no_elicitation' | 'declined' | 'cancelled' | 'denied' | 'no_answer' };

export const REFUSAL_TEXT: Record<Exclude<ApprovalOutcome, { approved: true }>['why'], string> = {
  disabled: 'approvals are disabled on this MCP server (--no-approvals)',
  no_elicitation: 'this MCP client cannot ask a person (it does not offer elicitation)',
  declined: 'the person declined the approval form',
  cancelled: 'the person dismissed the approval form',
  denied: 'the person denied the action',
  no_answer: 'the approval form got no valid answer',
};

const APPROVAL_FORM: ElicitRequestFormParams['requestedSchema'] = {
  type: 'object',
  properties: {
    decision: { type: 'string', title: 'Decision', enum: ['approve', 'deny'], description: 'Approve sends exactly the input shown; deny sends nothing.' },
    reason: { type: 'string', title: 'Reason', minLength: 1, maxLength: 1000, description: 'Recorded as the approval evidence.' },
  },
  required: ['decision', 'reason'],
};

export interface ApprovalRequest {
  server: Server;
  tool: HermesTool;
  input: unknown;
  principalId: string;
  /** The tool call the form belongs to: over HTTP the form travels on that call's stream. */
  requestId: RequestId;
  signal: AbortSignal;
  now?: () => number;
}

/**
 * Asks the person at the MCP client, through form elicitation, to approve this exact input. Only
 * an explicit approve with a reason becomes an AIP approval grant; anything else is a refusal.
 */
export async function askForApproval(request: ApprovalRequest): Promise<ApprovalOutcome> {
  const { server, tool, input, signal } = request;
  if (!server.getClientCapabilities()?.elicitation?.form) return { approved: false, why: 'no_elicitation' };
  let answer: { action: string; content?: Record<string, unknown> };
  try {
    answer = await server.elicitInput(
      { mode: 'form', message: formMessage(tool, input), requestedSchema: APPROVAL_FORM },
      { relatedRequestId: request.requestId, signal, timeout: ANSWER_TIMEOUT_MS },
    );
  } catch {
    return { approved: false, why: 'no_answer' };
  }
  if (answer.action === 'decline') return { approved: false, why: 'declined' };
  if (answer.action !== 'accept') return { approved: false, why: 'cancelled' };
  const decision = answer.content?.['decision'];
  const reason = answer.content?.['reason'];
  if (decision !== 'approve') return { approved: false, why: decision === 'deny' ? 'denied' : 'no_answer' };
  if (typeof reason !== 'string' || reason.trim() === '') return { approved: false, why: 'no_answer' };
  const grantedAt = (request.now ?? Date.now)();
  const client = server.getClientVersion();
  return {
    approved: true,
    grant: {
      approvalId: `appr_${randomBytes(16).toString('hex')}`,
      decision: 'approved',
      grantedAt,
      expiresAt: grantedAt + APPROVAL_WINDOW_MS,
      evidence: {
        reason: reason.trim(),
        inputSnapshot: input,
        policyDecision: {
          policy: 'mcp_elicitation',
          method: 'elicitation/create',
          decided_by: request.principalId,
          client: { name: client?.name ?? 'unknown', version: client?.version ?? 'unknown' },
          tool: tool.name,
        },
      },
    },
  };
}

function formMessage(tool: HermesTool, input: unknown): string {
  const runId = (input as { run_id?: unknown } | null)?.run_id;
  return [
    `Approve ${tool.operation} on Hermes endpoint "${tool.endpointId}"?`,
    `Run: ${typeof runId === 'string' ? runId : '(none)'}`,
    `Exact input that will be sent: ${JSON.stringify(input)}`,
  ].join('\n');
}
