/** A Herm session event as a UI keeps it: at least an `id`. */
export interface HermHistoryEvent {
  id?: string;
  [field: string]: unknown;
}

type EventFields = Record<string, unknown>;

/**
 * Applies a tool result update to an event history, as the seed says: "patch the existing event
 * identified by `payload.event_id` with `payload.payload`". Two forms are accepted:
 * - a `session.tool_updated` event from the stream: patches the event whose id is `payload.event_id`;
 * - the updated event a 202 returned (a `user.custom_tool_result` with its `id`): patches the event
 *   with that id, else the tool result of the same `tool_use_id`.
 * The patched event keeps its id and position, takes the update's fields and keeps the fields the
 * update lacks. Unknown ids and other events leave the history as it was. Pure: neither argument
 * is modified.
 */
export function applyToolUpdate<T extends HermHistoryEvent>(history: readonly T[], update: unknown): T[] {
  const patch = patchOf(update);
  const index = patch ? patch.indexIn(history) : -1;
  if (!patch || index < 0) return [...history];
  return history.map((event, at) => (at === index ? ({ ...event, ...structuredClone(patch.fields), id: event.id } as T) : event));
}

/** Where in a history the event an update targets is (-1: not there), and the fields it brings. */
function patchOf(update: unknown): { indexIn: (history: readonly HermHistoryEvent[]) => number; fields: EventFields } | undefined {
  if (!isFields(update)) return undefined;
  if (update.type === 'session.tool_updated') {
    const payload = update.payload;
    if (!isFields(payload) || typeof payload.event_id !== 'string' || !isFields(payload.payload)) return undefined;
    const eventId = payload.event_id;
    return { indexIn: (history) => history.findIndex((event) => event.id === eventId), fields: payload.payload };
  }
  if (update.type === 'user.custom_tool_result' && typeof update.id === 'string' && typeof update.tool_use_id === 'string') {
    const { id, tool_use_id: toolUseId } = update;
    const byId = (history: readonly HermHistoryEvent[]) => history.findIndex((event) => event.id === id);
    const byToolUse = (history: readonly HermHistoryEvent[]) =>
      history.findIndex((event) => event.type === 'user.custom_tool_result' && event.tool_use_id === toolUseId);
    return { indexIn: (history) => (byId(history) >= 0 ? byId(history) : byToolUse(history)), fields: update };
  }
  return undefined;
}

function isFields(value: unknown): value is EventFields {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
