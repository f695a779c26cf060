import { randomBytes } from 'node:crypto';
import type { TimerRegistry } from '../shared/timers.js';
import type { SessionStreams } from './stream.js';
import type { HermCustomToolUse, HermToolCallRequest, HermToolCallState, HermToolCallView } from './types.js';
import type { ToolResultInput } from './validate.js';
import { RESPONSE_EXPIRED, hermError, type HermErrorBody } from './wire.js';

/** An accepted `user.custom_tool_result`: the posted event plus its `id` and `session_id`. */
export type StoredResult = ToolResultInput & { id: string; session_id: string };

export type SubmitOutcome = { status: 202; body: { events: StoredResult[] } } | { status: 409 | 410; body: HermErrorBody };

interface ToolCall {
  sessionId: string;
  toolUseId: string;
  state: HermToolCallState;
  runningEventId?: string;
  finalEventId?: string;
  continuations: number;
  /** The `agent.custom_tool_use` event, when the call came from emitToolUse. */
  use?: HermCustomToolUse;
  /** Aborts the pending-timeout timer. */
  timeout?: AbortController;
}

function newId(prefix: string): string {
  return `${prefix}${randomBytes(12).toString('hex')}`;
}

/**
 * Session state: pending tool calls, event histories and continuation counts. Every mutation
 * happens synchronously, so concurrent requests are serialized by the event loop.
 */
export class HermSessions {
  private readonly histories = new Map<string, StoredResult[]>();
  private readonly calls = new Map<string, ToolCall>();
  private readonly acceptedLog: StoredResult[] = [];

  constructor(
    private readonly timers: TimerRegistry,
    private readonly streams: SessionStreams,
    private readonly pendingTimeoutMs: number,
  ) {}

  // ---- the agent side ------------------------------------------------------------------

  emitToolUse(sessionId: string, request: HermToolCallRequest): HermCustomToolUse {
    const toolUseId = request.tool_use_id ?? newId('custom_toolu_');
    const existing = this.calls.get(key(sessionId, toolUseId));
    if (existing) {
      // A redelivery: the same event again, whatever has happened to the call since.
      existing.use ??= toolUse(toolUseId, request);
      this.streams.publish(sessionId, structuredClone(existing.use));
      return structuredClone(existing.use);
    }
    const use = toolUse(toolUseId, request);
    const timeout = new AbortController();
    const call: ToolCall = { sessionId, toolUseId, state: 'pending', continuations: 0, use, timeout };
    this.calls.set(key(sessionId, toolUseId), call);
    void this.timers.delay(this.pendingTimeoutMs, timeout.signal).then((elapsed) => {
      if (elapsed && call.state === 'pending') this.expireCall(call);
    });
    this.streams.publish(sessionId, structuredClone(use));
    return structuredClone(use);
  }

  expire(sessionId: string, toolUseId: string): void {
    const existing = this.calls.get(key(sessionId, toolUseId));
    if (!existing) {
      this.calls.set(key(sessionId, toolUseId), { sessionId, toolUseId, state: 'expired', continuations: 0 });
    } else if (existing.state === 'pending') {
      this.expireCall(existing);
    }
  }

  private expireCall(call: ToolCall): void {
    call.state = 'expired';
    call.timeout?.abort();
    delete call.timeout;
  }

  // ---- POST /v1/sessions/{id}/events -------------------------------------------------

  /** Checks every event first, so a rejected request changes nothing. */
  submit(sessionId: string, events: ToolResultInput[]): SubmitOutcome {
    for (const event of events) {
      const rejection = this.rejection(sessionId, event);
      if (rejection) return rejection;
    }
    return { status: 202, body: { events: events.map((event) => structuredClone(this.apply(sessionId, event))) } };
  }

  private rejection(sessionId: string, event: ToolResultInput): SubmitOutcome | undefined {
    if (event.status !== 'running') return undefined;
    const call = this.calls.get(key(sessionId, event.tool_use_id));
    if (call?.state === 'expired') return { status: 410, body: RESPONSE_EXPIRED };
    if (call?.state === 'completed' || call?.state === 'failed') {
      const message = `tool_use_id ${event.tool_use_id} already has a final result; a running result can no longer be accepted`;
      return { status: 409, body: hermError('invalid_request_error', message) };
    }
    return undefined;
  }

  private apply(sessionId: string, event: ToolResultInput): StoredResult {
    const known = this.calls.has(key(sessionId, event.tool_use_id));
    const call = this.callFor(sessionId, event.tool_use_id);
    if (event.status === 'running') {
      // A retried kickoff returns the running result already accepted.
      if (call.state === 'running' && call.runningEventId !== undefined) return this.find(sessionId, call.runningEventId);
      const stored = this.append(sessionId, event);
      this.settle(call, 'running');
      call.runningEventId = stored.id;
      return stored;
    }
    // Final results are idempotent by session and tool_use_id.
    if (call.finalEventId !== undefined) return this.find(sessionId, call.finalEventId);
    let stored: StoredResult;
    if (call.state === 'pending' && known) {
      // An immediate result answers the blocked call: the current turn goes on, no new turn starts.
      stored = this.append(sessionId, event);
    } else if (call.state === 'running' && call.runningEventId !== undefined) {
      stored = this.replace(sessionId, call.runningEventId, event);
      call.continuations += 1;
    } else {
      // Expired or unknown call (no matching running result): appended as a new event, and it still starts a turn.
      stored = this.append(sessionId, event);
      call.continuations += 1;
    }
    this.settle(call, event.status);
    call.finalEventId = stored.id;
    return stored;
  }

  /**
   * The call for a result. A running result for a tool_use_id never seen is treated as answering a
   * pending call; a final one as having no matching running result.
   */
  private callFor(sessionId: string, toolUseId: string): ToolCall {
    const found = this.calls.get(key(sessionId, toolUseId));
    if (found) return found;
    const call: ToolCall = { sessionId, toolUseId, state: 'pending', continuations: 0 };
    this.calls.set(key(sessionId, toolUseId), call);
    return call;
  }

  private settle(call: ToolCall, state: HermToolCallState): void {
    call.timeout?.abort();
    delete call.timeout;
    call.state = state;
  }

  private store(sessionId: string, event: ToolResultInput): StoredResult {
    const stored: StoredResult = { ...structuredClone(event), id: newId('evt_'), session_id: sessionId };
    this.acceptedLog.push(stored);
    return stored;
  }

  private append(sessionId: string, event: ToolResultInput): StoredResult {
    const stored = this.store(sessionId, event);
    this.historyOf(sessionId).push(stored);
    this.streams.publish(sessionId, structuredClone(stored));
    return stored;
  }

  /** Replaces the running result in place and sends the ephemeral `session.tool_updated`. */
  private replace(sessionId: string, runningEventId: string, event: ToolResultInput): StoredResult {
    const stored = this.store(sessionId, event);
    const history = this.historyOf(sessionId);
    const index = history.findIndex((item) => item.id === runningEventId);
    if (index >= 0) history[index] = stored;
    else history.push(stored);
    const update = {
      type: 'session.tool_updated',
      session_id: sessionId,
      payload: { type: 'session.tool_updated', tool_use_id: event.tool_use_id, event_id: runningEventId, payload: structuredClone(stored) },
    };
    this.streams.publish(sessionId, update);
    return stored;
  }

  private find(sessionId: string, eventId: string): StoredResult {
    const found = this.historyOf(sessionId).find((item) => item.id === eventId);
    if (!found) throw new Error(`Herm simulator: event ${eventId} missing from session ${sessionId}`);
    return found;
  }

  private historyOf(sessionId: string): StoredResult[] {
    let history = this.histories.get(sessionId);
    if (!history) {
      history = [];
      this.histories.set(sessionId, history);
    }
    return history;
  }

  // ---- inspection --------------------------------------------------------------------

  history(sessionId: string): Array<Record<string, unknown>> {
    return plain(this.histories.get(sessionId) ?? []);
  }

  accepted(sessionId?: string): Array<Record<string, unknown>> {
    return plain(sessionId === undefined ? this.acceptedLog : this.acceptedLog.filter((item) => item.session_id === sessionId));
  }

  toolCall(sessionId: string, toolUseId: string): HermToolCallView | undefined {
    const call = this.calls.get(key(sessionId, toolUseId));
    if (!call) return undefined;
    const view: HermToolCallView = { session_id: call.sessionId, tool_use_id: call.toolUseId, state: call.state };
    if (call.runningEventId !== undefined) view.running_event_id = call.runningEventId;
    if (call.finalEventId !== undefined) view.final_event_id = call.finalEventId;
    return view;
  }

  continuations(sessionId: string, toolUseId: string): number {
    return this.calls.get(key(sessionId, toolUseId))?.continuations ?? 0;
  }
}

/** Deep copies, typed as the plain records the inspection API hands out. */
function plain(events: readonly StoredResult[]): Array<Record<string, unknown>> {
  return events.map((event): Record<string, unknown> => ({ ...structuredClone(event) }));
}

function toolUse(toolUseId: string, request: HermToolCallRequest): HermCustomToolUse {
  return { type: 'agent.custom_tool_use', id: newId('sevt_'), tool_use_id: toolUseId, name: request.name, input: structuredClone(request.input) };
}

function key(sessionId: string, toolUseId: string): string {
  return JSON.stringify([sessionId, toolUseId]);
}
