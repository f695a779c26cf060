import { typedId } from '../../../internal/ids.js';
import type { ScenarioEvidence } from '../../kit/types.js';
import { codeOf, outcome, type Harness } from '../harness.js';

/** A duplicate start is answered once; a reused key with another input is refused; the delivery keeps its identity. */
export async function idempotencyDuplicates(h: Harness): Promise<ScenarioEvidence> {
  const connector = h.connector();
  const original = await h.startRun(connector, 'harmless');
  await h.readEvents(connector, original.runId);
  const duplicate = await h.send(connector, { ...original.action, id: typedId('act_') });
  const redelivery = await h.send(connector, original.action);
  const collision = await h.send(connector, {
    ...h.action('run_start', { body: h.provider.bodies.harmless(), session_key: 'other-input' }),
    idempotency_key: original.action.idempotency_key as string,
  });
  const starts = [original, duplicate, redelivery, collision].flatMap((call) => call.requests).filter((request) => request.method === 'POST');
  const runOf = (call: { result: { output?: unknown } }) => (call.result.output as { run_id?: unknown } | undefined)?.run_id;

  const suppressed =
    starts.length === 1 && duplicate.requests.length === 0 && runOf(duplicate) === original.runId && duplicate.result.receipt?.['replayed'] === true;
  const rejected = codeOf(collision.result) === 'idempotency_conflict' && collision.requests.length === 0;
  const binding = await connector.evidence(original.action.id, { tenantId: h.tenant });
  const stable =
    runOf(redelivery) === original.runId &&
    redelivery.requests.length === 0 &&
    redelivery.result.receipt?.['original_action_id'] === original.action.id &&
    duplicate.result.receipt?.['original_action_id'] === original.action.id &&
    binding?.run_id === original.runId &&
    typeof starts[0]?.headers['idempotency-key'] === 'string';

  return {
    source: h.provider.source,
    assertions: {
      duplicate_suppressed: outcome(
        suppressed,
        suppressed
          ? 'the same start under a new action id was answered from the ledger (replayed) and Hermes saw one POST /v1/runs'
          : `Hermes saw ${starts.length} start request(s); the duplicate answered ${codeOf(duplicate.result) ?? duplicate.result.status}`,
      ),
      collision_rejected: outcome(
        rejected,
        rejected
          ? 'the same key with another input was refused as idempotency_conflict before any request'
          : `the colliding start answered ${codeOf(collision.result) ?? collision.result.status} after ${collision.requests.length} request(s)`,
      ),
      delivery_id_stable: outcome(
        stable,
        stable
          ? 'a redelivery of the original action and the duplicate both name the original action and run; the ledger binding and the forwarded Idempotency-Key stay with the first delivery'
          : 'a redelivery or duplicate did not name the original action and run, or no Idempotency-Key was forwarded',
      ),
    },
    artifacts: [original.action.id, original.runId, duplicate.action.id, redelivery.action.id, collision.action.id, ...starts.map((request) => request.id)],
    hostRoles: [],
    observations: {
      provider_start_requests: starts.map((request) => request.id),
      duplicate: { action_id: duplicate.action.id, replayed: duplicate.result.receipt?.['replayed'] ?? false, run_id: runOf(duplicate) ?? null },
      collision: { action_id: collision.action.id, code: collision.result.error?.code ?? null },
    },
    detail: 'one provider start for three deliveries of one key',
  };
}
