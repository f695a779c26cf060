import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { AipActionResult, AipProtocolError, RunEventsOutput } from '../types.js';
import type { HermesTool } from './tools.js';
import { errorCode } from '../failures.js';

const MAX_SUMMARY_TEXT = 2000;

/**
 * The MCP answer to one tool call. A completed action gives its AIP output as `structuredContent`
 * and a short text; anything else is `isError` with the typed AIP error, structured and as text.
 * Provider failures are results, never protocol errors.
 */
export function toolResult(tool: HermesTool, result: AipActionResult): CallToolResult {
  if (result.status === 'completed' && isObject(result.output)) {
    return { structuredContent: result.output, content: [{ type: 'text', text: summary(tool, result.output) }] };
  }
  const error = result.error ?? missingError(result);
  return {
    isError: true,
    structuredContent: { status: result.status === 'cancelled' ? 'cancelled' : 'failed', action_id: result.action_id, error },
    content: [{ type: 'text', text: errorText(tool, error) }],
  };
}

/** `connector.hermes_agent.not_found (permanent, not retryable, outcome known): <message>` */
export function errorText(tool: HermesTool, error: AipProtocolError): string {
  const retry = error.retryable ? `retryable${error.retry_after_ms === undefined ? '' : ` after ${error.retry_after_ms} ms`}` : 'not retryable';
  const outcome = error.details?.uncertain_outcome === true ? 'outcome uncertain: Hermes may have acted' : 'outcome known';
  return `${tool.name} failed: ${error.code} (${error.category}, ${retry}, ${outcome}): ${error.message}`;
}

function summary(tool: HermesTool, output: Record<string, unknown>): string {
  if (tool.operation === 'run_events') {
    const events = output as unknown as RunEventsOutput;
    const text = events.text.length > MAX_SUMMARY_TEXT ? `${events.text.slice(0, MAX_SUMMARY_TEXT)}…` : events.text;
    return `${events.events.length} events, ended by ${events.terminal_event ?? 'no terminal event'}. Text: ${text}`;
  }
  const runId = typeof output['run_id'] === 'string' ? output['run_id'] : 'unknown';
  const status = typeof output['status'] === 'string' ? `: ${output['status']}` : '';
  return `${tool.operation} on endpoint ${tool.endpointId} done; run ${runId}${status}`;
}

/** Every result that is not `completed` carries an error; this stands in should a status without one ever appear. */
function missingError(result: AipActionResult): AipProtocolError {
  return {
    code: errorCode('internal'),
    message: `The action ended with status ${result.status} and no output`,
    category: 'connector',
    retryable: false,
    details: { uncertain_outcome: true },
  };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
