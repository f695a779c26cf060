/** Validation of a `POST /v1/runs` body, in Hermes' order (§2 of the reference). */

export type RunRequestCheck =
  | { kind: 'ok'; userMessage: unknown }
  | { kind: 'bad-request'; message: string }
  /** Something Hermes does not catch (e.g. a non-object last input element): aiohttp's plain 500. */
  | { kind: 'unhandled' };

export function checkRunRequest(body: Record<string, unknown>): RunRequestCheck {
  const input = body['input'];
  if (!pyTruthy(input)) return { kind: 'bad-request', message: "Missing 'input' field" };
  const message = userMessageOf(input);
  if (message.kind !== 'ok') return message;
  if (!pyTruthy(message.userMessage)) return { kind: 'bad-request', message: 'No user message found in input' };
  const historyProblem = conversationHistoryProblem(body['conversation_history']);
  if (historyProblem !== undefined) return { kind: 'bad-request', message: historyProblem };
  return message;
}

function userMessageOf(input: unknown): RunRequestCheck {
  if (typeof input === 'string') return { kind: 'ok', userMessage: input };
  if (!Array.isArray(input)) return { kind: 'bad-request', message: 'No user message found in input' };
  const last: unknown = input[input.length - 1];
  if (!isPlainObject(last)) return { kind: 'unhandled' };
  return { kind: 'ok', userMessage: 'content' in last ? last['content'] : '' };
}

function conversationHistoryProblem(history: unknown): string | undefined {
  if (!pyTruthy(history)) return undefined;
  if (!Array.isArray(history)) return "'conversation_history' must be an array of message objects";
  const badIndex = history.findIndex((entry) => !isPlainObject(entry) || !('role' in entry) || !('content' in entry));
  return badIndex >= 0 ? `conversation_history[${badIndex}] must have 'role' and 'content' fields` : undefined;
}

/** The plain text of a user message: a string, or the `text` parts of a list-of-parts content. */
export function messageText(message: unknown): string {
  if (typeof message === 'string') return message;
  if (!Array.isArray(message)) return '';
  return message
    .filter((part): part is Record<string, unknown> => isPlainObject(part) && part['type'] === 'text')
    .map((part) => String(part['text'] ?? ''))
    .join(' ');
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Python's `bool(value)` for JSON values. */
export function pyTruthy(value: unknown): boolean {
  if (value === null || value === undefined || value === false) return false;
  if (typeof value === 'number') return value !== 0;
  if (typeof value === 'string') return value.length > 0;
  if (Array.isArray(value)) return value.length > 0;
  if (typeof value === 'object') return Object.keys(value).length > 0;
  return true;
}

/** Hermes' bool coercion for `all` / `resolve_all`: the usual strings, else truthiness. */
export function coerceBool(value: unknown): boolean {
  if (typeof value === 'string') {
    const word = value.trim().toLowerCase();
    if (['true', '1', 'yes', 'on'].includes(word)) return true;
    if (['false', '0', 'no', 'off'].includes(word)) return false;
  }
  return pyTruthy(value);
}
