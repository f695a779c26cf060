import { randomBytes, randomUUID } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  type CallToolRequest,
  type CallToolResult,
  type ServerNotification,
  type ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import { typedId } from '../internal/ids.js';
import { errorName } from '../internal/logger.js';
import { PACKAGE_NAME, PACKAGE_VERSION } from '../internal/package-info.js';
import type { AipAction, AipActionResult, AipStreamChunk, ExecutionContext, HermesConnector } from '../types.js';
import type { RunEvidence } from '../ledger/types.js';
import { askForApproval, REFUSAL_TEXT } from './approval.js';
import { outcomeText, toolResult } from './results.js';
import { IDEMPOTENCY_KEY_ARGUMENT, type HermesTool } from './tools.js';
import { errorCode } from '../failures.js';

/** Who calls: set by the server's configuration (and over HTTP by the bearer token), never by the client. */
export interface McpIdentity {
  principalId: string;
  tenantId?: string;
}

export interface McpServerOptions {
  connector: HermesConnector;
  tools: readonly HermesTool[];
  identity: McpIdentity;
  /** false: run_approval and run_stop are always refused as `approval_required` (`--no-approvals`). */
  approvals: boolean;
  /** Serve `hermes://evidence/{id}` (only with a durable ledger). */
  evidence: boolean;
  logger: Logger;
}

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

export const EVIDENCE_URI_PREFIX = 'hermes://evidence/';
/** MCP's "resource not found" error code. */
const RESOURCE_NOT_FOUND = -32002;
const MAX_PROGRESS_TEXT = 500;
const APPROVAL_REQUIRED = errorCode('approval_required');

/**
 * One MCP server session over the shared connector. The low-level `Server` (not `McpServer`)
 * because the tools publish the contracts' JSON Schemas as they are; McpServer wants zod.
 * Inputs are validated by the connector itself, against the same schemas.
 */
export function createHermesMcpServer(options: McpServerOptions): Server {
  const server = new Server(
    { name: PACKAGE_NAME, version: PACKAGE_VERSION, title: 'Hermes Agent runs (AIP connector)' },
    { capabilities: { tools: {}, ...(options.evidence ? { resources: {} } : {}) } },
  );
  const byName = new Map(options.tools.map((tool) => [tool.name, tool]));
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: options.tools.map((tool) => tool.definition) }));
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
    const tool = byName.get(request.params.name);
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name.slice(0, 200)}`);
    return callTool(server, options, tool, request, extra);
  });
  if (options.evidence) serveEvidence(server, options);
  return server;
}

async function callTool(server: Server, options: McpServerOptions, tool: HermesTool, request: CallToolRequest, extra: Extra): Promise<CallToolResult> {
  const startedAt = Date.now();
  const action = actionFor(tool, request.params.arguments ?? {});
  const context = contextFor(options.identity, extra, tool);
  const result = tool.needsApproval ? await invokeWithApproval(server, options, tool, action, context, extra) : await options.connector.invoke(action, context);
  logOutcome(options.logger, tool, result, Date.now() - startedAt, extra.signal.aborted);
  return toolResult(tool, result);
}

/** The tool's arguments as an AIP action: `idempotency_key` (or a fresh one) beside the input. */
function actionFor(tool: HermesTool, args: Record<string, unknown>): AipAction {
  const action: AipAction = { id: typedId('act_'), capability_id: tool.capabilityId, input: args };
  if (!tool.keyed) return action;
  const { [IDEMPOTENCY_KEY_ARGUMENT]: key, ...input } = args;
  action.input = input;
  // A key of the wrong type is passed on as given, for the connector to refuse as invalid_input.
  action.idempotency_key = (key ?? `mcp-${randomUUID()}`) as string;
  return action;
}

/** The same context `hermes-aip invoke` builds, with the MCP request's cancellation and progress. */
function contextFor(identity: McpIdentity, extra: Extra, tool: HermesTool): ExecutionContext {
  const context: ExecutionContext = {
    signal: extra.signal,
    actor: { principalId: identity.principalId },
    traceId: `trace_${randomBytes(16).toString('hex')}`,
  };
  if (identity.tenantId !== undefined) context.tenantId = identity.tenantId;
  const progressToken = extra._meta?.progressToken;
  if (tool.operation === 'run_events' && progressToken !== undefined) {
    context.onChunk = (chunk) =>
      extra.sendNotification({
        method: 'notifications/progress',
        params: { progressToken, progress: chunk.sequence + 1, message: progressMessage(chunk) },
      });
  }
  return context;
}

/**
 * `message.delta: Hello`, `tool.started`, ...: the Hermes event and its text, on one line (Hermes
 * starts the text after a tool with a blank line; the result keeps it, a status line need not).
 */
function progressMessage(chunk: AipStreamChunk): string {
  const event = (chunk.data as { hermes_sse?: { event?: unknown } } | undefined)?.hermes_sse?.event;
  const name = typeof event === 'string' ? event : chunk.kind;
  const text = chunk.part?.type === 'text' ? chunk.part.text.replace(/\s+/g, ' ').trim() : '';
  if (text === '') return name;
  return `${name}: ${text.length > MAX_PROGRESS_TEXT ? `${text.slice(0, MAX_PROGRESS_TEXT)}…` : text}`;
}

/**
 * The action is first checked by the connector without a grant: that can only be refused
 * locally, so a person is asked only about an action the connector would otherwise send.
 */
async function invokeWithApproval(
  server: Server,
  options: McpServerOptions,
  tool: HermesTool,
  action: AipAction,
  context: ExecutionContext,
  extra: Extra,
): Promise<AipActionResult> {
  const check = await options.connector.invoke({ ...action, id: typedId('act_') }, context);
  if (check.error?.code !== APPROVAL_REQUIRED) return check;
  const approval = options.approvals
    ? await askForApproval({ server, tool, input: action.input, principalId: options.identity.principalId, requestId: extra.requestId, signal: extra.signal })
    : ({ approved: false, why: 'disabled' } as const);
  if (!approval.approved)
    return { ...check, action_id: action.id, error: { ...check.error, message: `${check.error.message} (${REFUSAL_TEXT[approval.why]})` } };
  return options.connector.invoke(action, { ...context, approval: approval.grant });
}

function logOutcome(logger: Logger, tool: HermesTool, result: AipActionResult, durationMs: number, clientCancelled: boolean): void {
  const fields = {
    tool: tool.name,
    action_id: result.action_id,
    status: result.status,
    code: result.error?.code,
    uncertain_outcome: result.error?.details?.uncertain_outcome,
    duration_ms: durationMs,
  };
  // A cancelled request gets no response (MCP), so this line is where a cancelled mutation's uncertainty shows.
  if (clientCancelled) logger.warn(fields, `tool call cancelled by the client; ${outcomeText(tool, result)}`);
  else logger.info(fields, 'tool call finished');
}

function serveEvidence(server: Server, { connector, identity, logger }: McpServerOptions): void {
  server.setRequestHandler(ListResourcesRequestSchema, () => ({ resources: [] }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: [
      {
        uriTemplate: `${EVIDENCE_URI_PREFIX}{id}`,
        name: 'run-evidence',
        title: 'Hermes run evidence',
        description: 'What the run ledger keeps about a run, by action id or run id: binding, last status, terminal event, evidence loss.',
        mimeType: 'application/json',
      },
    ],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    const { uri } = request.params;
    const id = uri.startsWith(EVIDENCE_URI_PREFIX) ? decodeId(uri.slice(EVIDENCE_URI_PREFIX.length)) : '';
    const evidence = id === '' ? null : await readEvidence(connector, id, identity.tenantId ?? null, logger);
    if (!evidence) throw new McpError(RESOURCE_NOT_FOUND, 'Resource not found', { uri: uri.slice(0, 600) });
    return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify(evidence, null, 2) }] };
  });
}

/**
 * The ledger's evidence; a ledger that fails is a typed, generic error for the client (and its
 * class name in the log): a driver's message may hold its connection string or a statement.
 */
async function readEvidence(connector: HermesConnector, id: string, tenantId: string | null, logger: Logger): Promise<RunEvidence | null> {
  try {
    return await connector.evidence(id, { tenantId });
  } catch (error) {
    logger.error({ err: errorName(error) }, 'run ledger failed while reading evidence');
    throw new McpError(ErrorCode.InternalError, 'The run ledger could not be reached; try again later', {
      code: errorCode('ledger_unavailable'),
      retryable: true,
    });
  }
}

function decodeId(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return '';
  }
}
