export type ToolResultStatus = 'running' | 'completed' | 'failed';

export interface TextBlock {
  type: 'text';
  text: string;
}

/** A validated `user.custom_tool_result` as posted (no id yet). */
export interface ToolResultInput {
  type: 'user.custom_tool_result';
  tool_use_id: string;
  content: TextBlock[];
  status: ToolResultStatus;
  is_error: boolean;
}

export type EventsRequest = { kind: 'ok'; events: ToolResultInput[] } | { kind: 'invalid'; message: string };

const STATUSES: readonly string[] = ['running', 'completed', 'failed'];
const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Parses `{ "events": [ <user.custom_tool_result>, ... ] }`. Unknown extra fields are dropped.
 * One request may not name the same `tool_use_id` twice (so each event can be checked on its own).
 */
export function parseEventsRequest(bytes: Buffer): EventsRequest {
  let body: unknown;
  try {
    body = JSON.parse(strictUtf8.decode(bytes));
  } catch {
    return invalid('request body is not valid JSON');
  }
  if (!isObject(body) || !Array.isArray(body['events'])) return invalid('request body must be an object with an "events" array');
  const raw: unknown[] = body['events'];
  if (raw.length === 0) return invalid('"events" must not be empty');
  const events: ToolResultInput[] = [];
  const seen = new Set<string>();
  for (const [index, item] of raw.entries()) {
    const checked = checkEvent(item, `events[${index}]`);
    if (typeof checked === 'string') return invalid(checked);
    if (seen.has(checked.tool_use_id)) return invalid(`events[${index}].tool_use_id: the same tool_use_id appears twice in one request`);
    seen.add(checked.tool_use_id);
    events.push(checked);
  }
  return { kind: 'ok', events };
}

/** The event, or an error message. */
function checkEvent(item: unknown, where: string): ToolResultInput | string {
  if (!isObject(item)) return `${where} must be an object`;
  const type = item['type'];
  if (typeof type !== 'string') return `${where}.type is required`;
  if (type !== 'user.custom_tool_result') return `${where}.type: unknown event type ${JSON.stringify(type)}`;
  const toolUseId = item['tool_use_id'];
  if (typeof toolUseId !== 'string' || toolUseId === '') return `${where}.tool_use_id must be a non-empty string`;
  const content = checkContent(item['content'], `${where}.content`);
  if (typeof content === 'string') return content;
  const status = item['status'];
  if (status === undefined) return `${where}.status is required`;
  if (typeof status !== 'string' || !STATUSES.includes(status)) {
    return `${where}.status: unknown status ${JSON.stringify(status)} (expected running, completed or failed)`;
  }
  const isError = item['is_error'];
  if (typeof isError !== 'boolean') return `${where}.is_error must be a boolean`;
  return { type, tool_use_id: toolUseId, content, status: status as ToolResultStatus, is_error: isError };
}

function checkContent(value: unknown, where: string): TextBlock[] | string {
  if (!Array.isArray(value)) return `${where} must be an array of text blocks`;
  const blocks: TextBlock[] = [];
  for (const [index, block] of value.entries()) {
    if (!isObject(block) || block['type'] !== 'text' || typeof block['text'] !== 'string') {
      return `${where}[${index}] must be { "type": "text", "text": <string> }`;
    }
    blocks.push({ type: 'text', text: block['text'] });
  }
  return blocks;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function invalid(message: string): EventsRequest {
  return { kind: 'invalid', message };
}
