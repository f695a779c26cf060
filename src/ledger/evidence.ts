import type { CapabilityEntry } from '../contract/registry.js';
import type { AipActionResult, ExecutionContext, RunEventsOutput } from '../types.js';
import { statusOfTerminalEvent } from '../contract/hermes-vocabulary.js';
import type { RunEvidence, RunEvidencePatch } from './types.js';

/** evidence() without a tenant found an id that several tenants bound: the caller must say whose. */
export class AmbiguousEvidenceError extends Error {
  readonly code = 'ambiguous_evidence';

  constructor() {
    super('More than one tenant has a binding with this id: pass the tenant whose evidence you want');
    this.name = 'AmbiguousEvidenceError';
  }
}

/**
 * The one binding an evidence() lookup answers with, among the bindings whose action id or
 * run id is `id`: the action's binding, else the run's newest. Only a lookup without a tenant
 * can see several tenants' bindings, and then it refuses to choose between them.
 */
export function pickEvidence(id: string, candidates: RunEvidence[]): RunEvidence | null {
  const byAction = candidates.filter((candidate) => candidate.action_id === id);
  const pool = byAction.length > 0 ? byAction : candidates.filter((candidate) => candidate.run_id === id).sort((a, b) => b.created_at - a.created_at);
  const [first] = pool;
  if (first === undefined) return null;
  if (pool.some((candidate) => candidate.tenant_id !== first.tenant_id)) throw new AmbiguousEvidenceError();
  return first;
}

const NOT_FOUND = 'connector.hermes_agent.not_found';

/** The binding a successful run_start creates. */
export function bindingOf(entry: CapabilityEntry, actionId: string, input: unknown, context: ExecutionContext, result: AipActionResult, now: number): RunEvidence | undefined {
  if (entry.operation !== 'run_start' || result.status !== 'completed') return undefined;
  const output = result.output as { run_id: string; status: string };
  const requested = (input as { body?: { session_id?: unknown } }).body?.session_id;
  return {
    action_id: actionId,
    capability_id: entry.capability.id,
    endpoint_id: entry.endpoint.id,
    tenant_id: context.tenantId ?? null,
    run_id: output.run_id,
    // Hermes uses the run id as the session when none is given.
    session_id: typeof requested === 'string' ? requested : output.run_id,
    credential_revision: entry.endpoint.credentialRevision ?? null,
    created_at: now,
    updated_at: now,
    last_status: output.status,
    terminal_event: null,
    evidence_lost: false,
  };
}

/** What a status, events or stop result teaches about a bound run; undefined when nothing. */
export function patchOf(entry: CapabilityEntry, result: AipActionResult, now: number): RunEvidencePatch | undefined {
  switch (entry.operation) {
    case 'run_status':
      if (result.status === 'completed') return { updated_at: now, last_status: (result.output as { status: string }).status };
      if (result.error?.code === NOT_FOUND) return { updated_at: now, evidence_lost: true };
      return undefined;
    case 'run_events':
      return eventsPatch(result.output as RunEventsOutput | undefined, now);
    case 'run_stop':
      return result.status === 'completed' ? { updated_at: now, last_status: (result.output as { status: string }).status } : undefined;
    default:
      return undefined;
  }
}

function eventsPatch(output: RunEventsOutput | undefined, now: number): RunEvidencePatch | undefined {
  if (!output) return undefined;
  if (output.terminal_event) {
    return { updated_at: now, terminal_event: output.terminal_event, last_status: statusOfTerminalEvent(output.terminal_event) };
  }
  const reconciled = output.reconciliation;
  if (reconciled?.http_status === 404) return { updated_at: now, evidence_lost: true };
  const status = reconciled?.status?.status;
  return typeof status === 'string' ? { updated_at: now, last_status: status } : undefined;
}
