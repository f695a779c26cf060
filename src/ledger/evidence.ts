import type { RunEvidence } from './types.js';

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
