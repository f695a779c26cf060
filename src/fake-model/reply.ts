/**
 * What the fake model answers, decided from one chat-completions request alone (stateless), so a
 * stray auxiliary call (title generation, a smart-approval check, a recovery retry) never consumes
 * a scripted turn.
 */

/**
 * A text reply (streamed as `deltas` when given, else as a few deltas of its text), or a call of
 * Hermes' `terminal` tool.
 */
export type FakeReply = { kind: 'text'; text: string; deltas?: string[] } | { kind: 'tool_call'; name: 'terminal'; arguments: { command: string } };

/** Said after a tool result: non-empty, since an empty final reply makes Hermes retry. */
export const AFTER_TOOL_TEXT = 'The command has finished.';
/** Said when no directive applies. Plain words: Hermes redacts key-like strings. */
export const DEFAULT_TEXT = 'Hello from the fake model.';
/** Said to requests that offer no tools (auxiliary calls such as title generation). */
export const NO_TOOLS_TEXT = 'Fake model reply.';

/**
 * "Run the shell command: <cmd>" and the qualification's "…run exactly: <cmd> (…)" both name a
 * command; it ends at the end of the line or at " (" (a remark after it).
 */
const COMMAND_DIRECTIVE = /\brun (?:the shell command|exactly):\s*(.+?)(?:\s+\(|\s*$)/im;
/** The qualification's harmless prompt: "Reply with the single word: ready". */
const WORD_DIRECTIVE = /\breply with the single word:\s*(\S+)/i;
/** "Stream 1200 deltas": a text of that many deltas, `1 `, `2 `, …, `N` (a run with more events than Hermes retains). */
const DELTAS_DIRECTIVE = /\bstream (\d{1,5}) deltas\b/i;
/** The most deltas one reply streams. */
export const MAX_STREAMED_DELTAS = 10_000;

interface ChatMessage {
  role?: unknown;
  content?: unknown;
}

export function decideReply(request: { messages?: unknown; tools?: unknown }): FakeReply {
  const messages = Array.isArray(request.messages) ? (request.messages as ChatMessage[]) : [];
  if (!Array.isArray(request.tools) || request.tools.length === 0) return { kind: 'text', text: NO_TOOLS_TEXT };
  if (messages[messages.length - 1]?.role === 'tool') return { kind: 'text', text: AFTER_TOOL_TEXT };
  const prompt = lastUserText(messages);
  const command = COMMAND_DIRECTIVE.exec(prompt)?.[1]?.trim();
  if (command) return { kind: 'tool_call', name: 'terminal', arguments: { command } };
  const count = Number(DELTAS_DIRECTIVE.exec(prompt)?.[1] ?? 0);
  if (count > 0) {
    const deltas = Array.from({ length: Math.min(count, MAX_STREAMED_DELTAS) }, (_, index) => `${index + 1} `);
    deltas[deltas.length - 1] = (deltas.at(-1) as string).trimEnd();
    return { kind: 'text', text: deltas.join(''), deltas };
  }
  const word = WORD_DIRECTIVE.exec(prompt)?.[1]?.replace(/[.!]+$/, '');
  return { kind: 'text', text: word ?? DEFAULT_TEXT };
}

/** The text of the last `user` message; list-of-parts content is joined. */
function lastUserText(messages: ChatMessage[]): string {
  const user = [...messages].reverse().find((message) => message.role === 'user');
  if (typeof user?.content === 'string') return user.content;
  if (!Array.isArray(user?.content)) return '';
  return user.content
    .map((part: unknown) =>
      typeof part === 'object' && part !== null && typeof (part as { text?: unknown }).text === 'string' ? (part as { text: string }).text : '',
    )
    .join('\n');
}

/** Splits a text into a few deltas (at least two when it has two characters), like a streamed reply. */
export function textDeltas(text: string): string[] {
  const size = Math.max(1, Math.ceil(text.length / 3));
  const deltas: string[] = [];
  for (let start = 0; start < text.length; start += size) deltas.push(text.slice(start, start + size));
  return deltas;
}
