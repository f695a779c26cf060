import { inspect } from 'node:util';
import type { ScenarioEvidence } from '../../kit/types.js';
import { codeOf, type Harness, KIT_ACTOR, kitId, OTHER_TENANT, outcome } from '../harness.js';

/** Who acts reaches Hermes only from the trusted context; another tenant is refused; the key stays a handle. */
export async function identityCredentials(h: Harness): Promise<ScenarioEvidence> {
  const connector = h.connector();
  const traceId = kitId('corr_');
  const start = await h.startRun(connector, 'harmless', { context: { traceId } });
  await h.readEvents(connector, start.runId);
  const sent = start.requests.find((request) => request.method === 'POST');
  const expected: Record<string, string> = {
    'x-aip-principal-id': KIT_ACTOR.principalId,
    'x-aip-authentication-issuer': KIT_ACTOR.issuer,
    'x-aip-tenant-id': h.tenant,
    'x-aip-trace-id': traceId,
    'x-aip-correlation-id': traceId,
  };
  const wrongHeaders = Object.entries(expected)
    .filter(([name, value]) => sent?.headers[name] !== value)
    .map(([name]) => name);
  const actorBound = sent !== undefined && wrongHeaders.length === 0 && sent.credential === 'expected';

  const otherTenant = await h.invoke(connector, 'run_status', { run_id: start.runId }, { context: { tenantId: OTHER_TENANT } });
  const noTenant = await h.invoke(
    connector,
    'run_status',
    { run_id: start.runId },
    { rawContext: { actor: KIT_ACTOR, deadline: h.clock.now() + h.provider.stepTimeoutMs } },
  );
  const refusals = [otherTenant, noTenant];
  const refused = refusals.every((call) => codeOf(call.result) === 'tenant_mismatch' && call.requests.length === 0);
  const ownEvidence = await connector.evidence(start.action.id, { tenantId: h.tenant });
  const otherEvidence = await connector.evidence(start.action.id, { tenantId: OTHER_TENANT });
  const isolated = refused && ownEvidence?.run_id === start.runId && otherEvidence === null;

  const revision = ownEvidence?.credential_revision ?? null;
  const surfaces = [connector.manifest(), connector.capabilities(), inspect(connector, { depth: 8 }), ownEvidence];
  const opaque = revision !== null && /^[0-9a-f]{12}$/.test(revision) && !h.provider.apiKey.includes(revision) && h.secretAbsent(h.provider.apiKey, surfaces);

  return {
    source: h.provider.source,
    assertions: {
      transport_actor_bound: outcome(
        actorBound,
        actorBound
          ? 'run_start reached Hermes with the context actor, issuer, tenant and trace as X-AIP-* headers and the configured bearer credential'
          : `run_start reached Hermes with wrong or missing ${[...wrongHeaders, ...(sent?.credential === 'expected' ? [] : ['credential'])].join(', ') || 'request'}`,
      ),
      tenant_isolated: outcome(
        isolated,
        isolated
          ? `another tenant and no tenant were refused with tenant_mismatch before any request; ${OTHER_TENANT} cannot see ${h.tenant}'s run binding`
          : `refusals ${refusals.map((call) => `${codeOf(call.result) ?? call.result.status}/${call.requests.length} request(s)`).join(', ')}; other tenant's evidence ${otherEvidence === null ? 'hidden' : 'visible'}`,
      ),
      credential_handle_opaque: outcome(
        opaque,
        opaque
          ? 'the ledger names the credential by a 12-hex revision; the key is absent from manifest, capabilities, inspect(), results, chunks and trace logs'
          : 'the key or a derivable form of it was exposed, or no credential revision was recorded',
      ),
    },
    artifacts: [start.action.id, start.runId, ...start.requests.map((request) => request.id), otherTenant.action.id, noTenant.action.id],
    hostRoles: ['verified the tenant and authenticated the actor (the trusted execution context)'],
    observations: {
      start_request: sent ?? null,
      refusals: refusals.map((call) => ({ action_id: call.action.id, code: call.result.error?.code ?? null, provider_requests: call.requests.length })),
      credential_revision: revision,
    },
    detail: `actor and tenant observed at the proxy on ${sent?.id ?? 'no request'}; cross-tenant calls refused locally`,
  };
}
