import { afterEach, describe, expect, it } from 'vitest';
import { setTimeout } from 'node:timers/promises';
import {
  createHermesConnector,
  type AipAction,
  type AipActionResult,
  type AipStreamChunk,
  type ExecutionContext,
  type HermesConnector,
  type RunEventsOutput,
} from '../../src/index.js';
import type { SimulatorProfile } from '../../src/simulator/index.js';
import type { ConnectorFactory } from '../../src/conformance/hermes/harness.js';
import type { ScenarioId } from '../../src/conformance/kit/types.js';
import { simulatedTarget, type SimulatedTarget } from './helpers.js';

type Invoke = (inner: HermesConnector, action: AipAction, context: ExecutionContext | undefined) => Promise<AipActionResult>;

/** A connector whose invoke() is broken in one way; everything else is the real connector. */
function brokenInvoke(invoke: Invoke): ConnectorFactory {
  return (options) => {
    const inner = createHermesConnector({ endpoints: [options.endpoint], logger: options.logger, ...(options.ledger ? { ledger: options.ledger } : {}) });
    return { ...inner, invoke: (action, context) => invoke(inner, action, context) };
  };
}

const operationOf = (action: AipAction) => action.capability_id.split(':').pop();

/** A connector whose run_events input is rewritten on its way in. */
const rewritingEvents = (rewrite: (input: Record<string, unknown>) => Record<string, unknown>) =>
  brokenInvoke((inner, action, context) =>
    inner.invoke(operationOf(action) === 'run_events' ? { ...action, input: rewrite(action.input as Record<string, unknown>) } : action, context),
  );

/** Answers every later read of a run with the events the first read of it delivered, again (a cache replayed); shared across restarts. */
function repeatingEvents(): ConnectorFactory {
  const seen = new Map<string, RunEventsOutput['events']>();
  return brokenInvoke(async (inner, action, context) => {
    const result = await inner.invoke(action, context);
    if (operationOf(action) !== 'run_events') return result;
    const runId = (action.input as { run_id: string }).run_id;
    const output = result.output as RunEventsOutput | undefined;
    const earlier = seen.get(runId);
    if (!earlier) seen.set(runId, output?.events ?? []);
    return earlier ? { ...result, output: { ...output, events: [...earlier, ...(output?.events ?? [])] } } : result;
  });
}

const BREAKAGES: Array<{ how: string; scenario: ScenarioId; assertion: string; factory: ConnectorFactory; profile?: SimulatorProfile; reason?: RegExp }> = [
  {
    how: 'drops the second chunk of every stream',
    scenario: 'streaming_backpressure',
    assertion: 'ordered_chunks',
    factory: brokenInvoke((inner, action, context) =>
      inner.invoke(action, context?.onChunk ? { ...context, onChunk: (chunk) => (chunk.sequence === 1 ? undefined : context.onChunk?.(chunk)) } : context),
    ),
  },
  {
    how: 'publishes a second final chunk',
    scenario: 'streaming_backpressure',
    assertion: 'terminal_chunk_unique',
    factory: brokenInvoke(async (inner, action, context) => {
      const result = await inner.invoke(action, context);
      await context?.onChunk?.({ action_id: action.id, sequence: 999, kind: 'done' });
      return result;
    }),
  },
  {
    how: 'does not wait for its chunk consumer',
    scenario: 'streaming_backpressure',
    assertion: 'bounded_backpressure',
    factory: brokenInvoke((inner, action, context) =>
      inner.invoke(action, context?.onChunk ? { ...context, onChunk: (chunk) => void context.onChunk?.(chunk) } : context),
    ),
  },
  {
    how: 'reads the whole stream before handing any chunk to its consumer',
    scenario: 'streaming_backpressure',
    assertion: 'ordered_chunks',
    factory: brokenInvoke(async (inner, action, context) => {
      const onChunk = context?.onChunk;
      if (!onChunk) return inner.invoke(action, context);
      const buffered: AipStreamChunk[] = [];
      const result = await inner.invoke(action, { ...context, onChunk: (chunk) => void buffered.push(chunk) });
      for (const chunk of buffered) await onChunk(chunk);
      return result;
    }),
  },
  {
    how: 'stops waiting for a slow chunk consumer after 5 ms',
    scenario: 'streaming_backpressure',
    assertion: 'bounded_backpressure',
    factory: brokenInvoke((inner, action, context) => {
      const onChunk = context?.onChunk;
      if (!onChunk) return inner.invoke(action, context);
      return inner.invoke(action, { ...context, onChunk: (chunk) => Promise.race([onChunk(chunk), setTimeout(5)]) });
    }),
  },
  {
    how: 'leaks the key into error messages',
    scenario: 'errors_uncertain_outcomes',
    assertion: 'error_secrets_redacted',
    factory: (options) => {
      const leaky = brokenInvoke(async (inner, action, context) => {
        const result = await inner.invoke(action, context);
        return result.error ? { ...result, error: { ...result.error, message: `${result.error.message} (key ${options.endpoint.apiKey})` } } : result;
      });
      return leaky(options);
    },
  },
  {
    how: 'skips the tenant check (endpoint not bound)',
    scenario: 'identity_credentials',
    assertion: 'tenant_isolated',
    factory: (options) => createHermesConnector({ endpoints: [{ ...options.endpoint, tenantId: undefined }], logger: options.logger }),
  },
  {
    how: 'forgets the actor on the way to Hermes',
    scenario: 'identity_credentials',
    assertion: 'transport_actor_bound',
    factory: brokenInvoke((inner, action, context) => inner.invoke(action, { ...context, actor: undefined })),
  },
  {
    how: 'resends every start under a fresh key',
    scenario: 'idempotency_duplicates',
    assertion: 'duplicate_suppressed',
    factory: brokenInvoke((inner, action, context) =>
      operationOf(action) === 'run_start'
        ? inner.invoke({ ...action, idempotency_key: `${action.idempotency_key}-${action.id}` }, context)
        : inner.invoke(action, context),
    ),
  },
  {
    how: 'retries retryable failures itself',
    scenario: 'retry_exhaustion',
    assertion: 'exhaustion_dead_lettered',
    factory: brokenInvoke(async (inner, action, context) => {
      const first = await inner.invoke(action, context);
      return first.error?.retryable ? inner.invoke(action, context) : first;
    }),
  },
  {
    how: 'passes invalid provider answers on as successes',
    scenario: 'schema_enforcement',
    assertion: 'invalid_output_rejected',
    factory: brokenInvoke(async (inner, action, context) => {
      const result = await inner.invoke(action, context);
      return result.error?.code === 'connector.hermes_agent.invalid_response' ? { action_id: result.action_id, status: 'completed', output: [] } : result;
    }),
  },
  {
    how: 'ignores a signal aborted before dispatch',
    scenario: 'cancellation_races',
    assertion: 'before_dispatch_cancelled',
    factory: brokenInvoke((inner, action, context) => inner.invoke(action, { ...context, signal: undefined })),
  },
  {
    how: 'drops receipts',
    scenario: 'audit_redaction',
    assertion: 'receipts_emitted',
    factory: brokenInvoke(async (inner, action, context) => {
      const { receipt: _dropped, ...rest } = await inner.invoke(action, context);
      return rest;
    }),
  },
  {
    how: 'approves without a grant from the authority',
    scenario: 'approval_lifecycle',
    assertion: 'authority_verified',
    factory: brokenInvoke((inner, action, context) => {
      if (operationOf(action) !== 'run_approval' || context?.approval) return inner.invoke(action, context);
      const now = Date.now();
      const approval = {
        approvalId: `appr_forged_${action.id}`,
        decision: 'approved' as const,
        grantedAt: now,
        expiresAt: now + 60_000,
        evidence: { reason: 'forged', inputSnapshot: action.input, policyDecision: {} },
      };
      return inner.invoke(action, { ...context, approval });
    }),
  },
  {
    how: 'starts again after a restart instead of answering from the ledger',
    scenario: 'restart_reconnect',
    assertion: 'duplicate_effect_prevented',
    factory: (options) => createHermesConnector({ endpoints: [options.endpoint], logger: options.logger }),
  },
  {
    how: 'replays what it delivered before the restart (no replay at the pin)',
    scenario: 'restart_reconnect',
    assertion: 'reconnect_cursor_resumed',
    factory: repeatingEvents(),
    reason: /no_replay rule: .*event\(s\) were delivered twice/,
  },
  {
    how: 'ignores the cursor, so a Hermes that replays (v0.22) sends the backlog again from the start',
    scenario: 'restart_reconnect',
    assertion: 'reconnect_cursor_resumed',
    factory: rewritingEvents(({ last_seq: _ignored, ...input }) => input),
    profile: 'v0.22',
    reason: /replay rule: .*delivered again an event the cut stream had delivered/,
  },
  {
    how: 'skips the first event after the cursor on a Hermes that replays (v0.22)',
    scenario: 'restart_reconnect',
    assertion: 'reconnect_cursor_resumed',
    factory: rewritingEvents((input) => (typeof input['last_seq'] === 'number' ? { ...input, last_seq: input['last_seq'] + 1 } : input)),
    profile: 'v0.22',
    reason: /replay rule: .*dropped without events_lost/,
  },
];

let target: SimulatedTarget | undefined;
afterEach(async () => {
  await target?.close();
  target = undefined;
});

describe('each assertion fails when the connector is broken in its way', { timeout: 30_000 }, () => {
  for (const breakage of BREAKAGES) {
    it(`${breakage.scenario}.${breakage.assertion}: a connector that ${breakage.how}`, async () => {
      target = await simulatedTarget(breakage.profile ?? 'pin', breakage.factory);
      const evidence = await target.driver.exercise(breakage.scenario);
      expect(evidence.assertions[breakage.assertion]?.passed, evidence.assertions[breakage.assertion]?.reason).toBe(false);
      if (breakage.reason) expect(evidence.assertions[breakage.assertion]?.reason).toMatch(breakage.reason);
    });
  }
});
