import { randomBytes } from 'node:crypto';
import { textDeltas, type FakeReply } from './reply.js';

/** The OpenAI chat-completions bodies (streamed chunks or one plain object) for one reply. */

export const FAKE_MODEL_ID = 'fake-model';

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** Identity shared by every chunk of one completion. */
interface CompletionHeader {
  id: string;
  created: number;
  model: string;
}

function header(): CompletionHeader {
  return { id: `chatcmpl-${randomBytes(12).toString('hex')}`, created: Math.floor(Date.now() / 1000), model: FAKE_MODEL_ID };
}

/** Rough token counts (4 characters a token): enough for Hermes' usage bookkeeping. */
function usageOf(requestBytes: number, reply: FakeReply): Usage {
  const produced = reply.kind === 'text' ? reply.text : JSON.stringify(reply.arguments);
  const prompt = Math.ceil(requestBytes / 4);
  const completion = Math.max(1, Math.ceil(produced.length / 4));
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

function toolCall(reply: Extract<FakeReply, { kind: 'tool_call' }>) {
  return { id: `call_${randomBytes(8).toString('hex')}`, type: 'function', function: { name: reply.name, arguments: JSON.stringify(reply.arguments) } };
}

/** One non-streamed `chat.completion`. */
export function plainCompletion(reply: FakeReply, requestBytes: number): Record<string, unknown> {
  const message = reply.kind === 'text' ? { role: 'assistant', content: reply.text } : { role: 'assistant', content: null, tool_calls: [toolCall(reply)] };
  return {
    ...header(),
    object: 'chat.completion',
    choices: [{ index: 0, message, finish_reason: reply.kind === 'text' ? 'stop' : 'tool_calls' }],
    usage: usageOf(requestBytes, reply),
  };
}

/**
 * The `chat.completion.chunk` objects of a streamed reply: text as several content deltas, or a tool
 * call as its name then its complete JSON arguments; then the finish reason; then, when asked for,
 * a usage chunk with no choices.
 */
export function streamedCompletion(reply: FakeReply, requestBytes: number, includeUsage: boolean): Record<string, unknown>[] {
  const base = { ...header(), object: 'chat.completion.chunk' };
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) => ({
    ...base,
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  });
  const chunks: Record<string, unknown>[] =
    reply.kind === 'text'
      ? (reply.deltas ?? textDeltas(reply.text)).map((text, index) => chunk(index === 0 ? { role: 'assistant', content: text } : { content: text }))
      : toolCallChunks(reply).map((delta) => chunk(delta));
  chunks.push(chunk({}, reply.kind === 'text' ? 'stop' : 'tool_calls'));
  if (includeUsage) chunks.push({ ...base, choices: [], usage: usageOf(requestBytes, reply) });
  return chunks;
}

function toolCallChunks(reply: Extract<FakeReply, { kind: 'tool_call' }>): Record<string, unknown>[] {
  const { id, type, function: fn } = toolCall(reply);
  return [
    { role: 'assistant', tool_calls: [{ index: 0, id, type, function: { name: fn.name, arguments: '' } }] },
    { tool_calls: [{ index: 0, function: { arguments: fn.arguments } }] },
  ];
}
