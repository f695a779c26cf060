/** A Herm session event as a UI keeps it: at least an `id`. */
export interface HermHistoryEvent {
  id?: string;
  [field: string]: unknown;
}

/**
 * Applies a `session.tool_updated` event (or the updated event a 202 returned, wrapped the
 * same way) to an event history: the event whose id is `payload.event_id` is replaced by
 * `payload.payload`. Unknown ids and other event types leave the history as it was. Pure:
 * the input array is never modified.
 */
export function applyToolUpdate<T extends HermHistoryEvent>(history: readonly T[], update: unknown): T[] {
  const payload = (update as { type?: unknown; payload?: unknown } | null)?.payload as { event_id?: unknown; payload?: unknown } | undefined;
  if ((update as { type?: unknown } | null)?.type !== 'session.tool_updated' || typeof payload?.event_id !== 'string') return [...history];
  const replacement = payload.payload;
  if (replacement === null || typeof replacement !== 'object') return [...history];
  return history.map((event) => (event.id === payload.event_id ? ({ ...(replacement as T) }) : event));
}
