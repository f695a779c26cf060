import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { AipActionResult, RunEventsOutput } from '../types.js';
import type { HermesTool } from './tools.js';

const MAX_SUMMARY_TEXT = 2000;

/**
 * The MCP answer to one tool call. A completed action gives its AIP output as `structuredContent`
 * and a short text; any other outcome gives the AIP result as the connector returned it
 * (`{ status, action_id, output?, error? }`: a cancelled run keeps its events, an error is never
 * made up), `isError` when it failed or carries an error. Provider failures are results, never protocol errors.
 */
export function toolResult(tool: HermesTool, result: AipActionResult): CallToolResult {
  if (result.status === 'completed' && isObject(result.output)) {
    return { structuredContent: result.output, content: [{ type: 'text', text: summary(tool, result.output) }] };
  }
  const structuredContent: Record<string, unknown> = { status: result.status, action_id: result.action_id };
  if (result.output !== undefined) structuredContent['output'] = result.output;
  if (result.error) structuredContent['error'] = result.error;
  const lines = [outcomeText(tool, result)];
  if (isObject(result.output)) lines.push(summary(tool, result.output));
  return {
    ...(result.status === 'failed' || result.error ? { isError: true } : {}),
    structuredContent,
    content: [{ type: 'text', text: lines.join('\n') }],
  };
}

/**
 * `hermes_x_run_status failed: connector.hermes_agent.not_found (permanent, not retryable, outcome known): <message>`,
 * or `hermes_x_run_events cancelled` for a result without an error.
 */
export function outcomeText(tool: HermesTool, result: AipActionResult): string {
  const { error } = result;
  if (!error) return `${tool.name} ${result.status}`;
  const retry = error.retryable ? `retryable${error.retry_after_ms === undefined ? '' : ` after ${error.retry_after_ms} ms`}` : 'not retryable';
  const outcome = error.details?.uncertain_outcome === true ? 'outcome uncertain: Hermes may have acted' : 'outcome known';
  return `${tool.name} ${result.status}: ${error.code} (${error.category}, ${retry}, ${outcome}): ${error.message}`;
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

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
