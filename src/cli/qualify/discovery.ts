import { canonicalJson } from '../../internal/canonical-json.js';
import type { AipCapability, OperationName } from '../../index.js';
import { AIP_VERSION, HERMES_PINNED_REVISION } from '../../internal/package-info.js';
import { describeSchemaErrors, schemaCatalog } from '../../contract/schemas.js';
import { sha256 } from '../identities.js';
import { CheckFailed, type Check } from './types.js';

/** What one capability must publish, from the seed's operations table and shared contract (004), not from contracts/. */
interface ExpectedCapability {
  method: 'GET' | 'POST';
  path: string;
  risk: 'low' | 'medium';
  approval: boolean;
  idempotency: 'required' | 'optional';
  sideEffects: string[];
}

const MUTATION = ['external_network', 'read', 'write'];
const READ = ['external_network', 'read'];

/** The seed's "Hermes structured runs and approvals" table, written out independently of the contracts it checks. */
const SEED_CAPABILITIES: Readonly<Record<OperationName, ExpectedCapability>> = {
  run_start: { method: 'POST', path: '/v1/runs', risk: 'medium', approval: false, idempotency: 'required', sideEffects: MUTATION },
  run_status: { method: 'GET', path: '/v1/runs/{run_id}', risk: 'low', approval: false, idempotency: 'optional', sideEffects: READ },
  run_events: { method: 'GET', path: '/v1/runs/{run_id}/events', risk: 'low', approval: false, idempotency: 'optional', sideEffects: READ },
  run_approval: { method: 'POST', path: '/v1/runs/{run_id}/approval', risk: 'medium', approval: true, idempotency: 'required', sideEffects: MUTATION },
  run_stop: { method: 'POST', path: '/v1/runs/{run_id}/stop', risk: 'medium', approval: true, idempotency: 'required', sideEffects: MUTATION },
  // Issue 32 (item 7), beyond the seed: published only for an endpoint configured with operations.run_steer.
  run_steer: { method: 'POST', path: '/v1/runs/{run_id}/steer', risk: 'medium', approval: true, idempotency: 'required', sideEffects: MUTATION },
};

/**
 * (1) Discovery, as an outside caller sees it (the manifest and the capability lookup), exposes
 * exactly the capability ids configured for the endpoint (the five, and run_steer where it opted in),
 * each publishing what the seed's table says.
 */
export const discovery: Check = {
  id: 'discovery',
  title: 'discovery exposes exactly the expected capability IDs (five, six with steer) and contracts',
  async run(session, evidence) {
    const manifest = session.connector.manifest();
    const validate = schemaCatalog().validator('aip/manifest.schema.json');
    if (!validate(manifest)) throw new CheckFailed(`the manifest does not match schemas/aip/manifest.schema.json: ${describeSchemaErrors(validate.errors)}`);
    const compatibility = manifest.compatibility as { aip_version?: unknown; upstream_revision?: unknown };
    evidence['manifest_version'] = manifest.manifest_version;
    evidence['aip_version'] = compatibility.aip_version;
    if (compatibility.aip_version !== AIP_VERSION) throw new CheckFailed(`the manifest declares AIP ${String(compatibility.aip_version)}, not ${AIP_VERSION}`);
    if (compatibility.upstream_revision !== HERMES_PINNED_REVISION) throw new CheckFailed('the manifest does not name the pinned Hermes revision');

    const prefix = `cap:hermes_agent:${session.endpoint.id}:`;
    const listed = manifest.capabilities.filter((capability) => capability.id.startsWith(prefix));
    const found = listed.map((capability) => capability.id);
    const operations = configuredOperations(session.endpoint.operations);
    const expected = operations.map((operation) => session.cap(operation));
    evidence['capability_ids'] = found;
    const missing = expected.filter((id) => !found.includes(id));
    const extra = found.filter((id) => !expected.includes(id));
    if (missing.length > 0 || extra.length > 0 || found.length !== expected.length) {
      throw new CheckFailed(
        `expected exactly ${expected.length} capability ids for endpoint ${session.endpoint.id}; missing: ${missing.join(', ') || 'none'}; unexpected: ${extra.join(', ') || 'none'}`,
      );
    }

    const contracts: Record<string, unknown> = {};
    evidence['contracts'] = contracts;
    for (const operation of operations) {
      const id = session.cap(operation);
      const capability = listed.find((candidate) => candidate.id === id) as AipCapability;
      if (canonicalJson(session.connector.capability(id)) !== canonicalJson(capability)) {
        throw new CheckFailed(`capability(${id}) does not return what the manifest lists for it`);
      }
      const published = publishedShape(capability);
      contracts[id] = { ...published, contract_sha256: sha256(canonicalJson(capability.contract)) };
      const differences = differencesFromSeed(published, SEED_CAPABILITIES[operation]);
      if (differences.length > 0) throw new CheckFailed(`${id} does not publish what the seed's table says: ${differences.join('; ')}`);
      const binding = capability.bindings[0];
      if (capability.bindings.length !== 1 || binding?.endpoint_id !== session.endpoint.id || binding.operation !== operation) {
        throw new CheckFailed(`${id} is not bound to endpoint ${session.endpoint.id} and operation ${operation}`);
      }
    }
  },
};

/** The five operations every endpoint has, and each optional one its configuration turned on. */
function configuredOperations(optional: { run_steer?: boolean } | undefined): OperationName[] {
  const operations = Object.keys(SEED_CAPABILITIES) as OperationName[];
  return operations.filter((operation) => operation !== 'run_steer' || optional?.run_steer === true);
}

/** The facts of a capability that the seed's table fixes, as the capability publishes them. */
function publishedShape(capability: AipCapability): Record<string, unknown> {
  const contract = capability.contract as { side_effects?: unknown; idempotency?: { requirement?: unknown }; approval?: { required?: unknown } };
  const binding = capability.bindings[0];
  return {
    kind: capability.kind,
    stability: capability.stability,
    method: binding?.method,
    path: binding?.path,
    risk: capability.risk,
    requires_human_approval: capability.requires_human_approval,
    contract_approval_required: contract.approval?.required === true,
    idempotency: contract.idempotency?.requirement,
    side_effects: Array.isArray(contract.side_effects) ? [...(contract.side_effects as string[])].sort() : contract.side_effects,
  };
}

function differencesFromSeed(published: Record<string, unknown>, seed: ExpectedCapability): string[] {
  const wanted: Record<string, unknown> = {
    kind: 'workflow',
    stability: 'stable',
    method: seed.method,
    path: seed.path,
    risk: seed.risk,
    requires_human_approval: seed.approval,
    contract_approval_required: seed.approval,
    idempotency: seed.idempotency,
    side_effects: seed.sideEffects,
  };
  return Object.entries(wanted)
    .filter(([field, value]) => JSON.stringify(published[field]) !== JSON.stringify(value))
    .map(([field, value]) => `${field} is ${JSON.stringify(published[field])}, not ${JSON.stringify(value)}`);
}
