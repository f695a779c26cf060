import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { canonicalJson } from '../../canonical-json.js';
import { AIP_VERSION, HERMES_PINNED_REVISION, PACKAGE_ROOT } from '../../package-info.js';
import { describeSchemaErrors, schemaCatalog } from '../../schemas.js';
import { OPERATION_NAMES } from '../../index.js';
import { sha256 } from '../identities.js';
import { CheckFailed, type Check } from './types.js';

/** (1) Discovery exposes exactly the five capability ids of the endpoint, each with its published contract. */
export const discovery: Check = {
  id: 'discovery',
  title: 'discovery exposes exactly the five expected capability IDs and contracts',
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
    const found = manifest.capabilities.filter((capability) => capability.id.startsWith(prefix)).map((capability) => capability.id);
    const expected = OPERATION_NAMES.map((operation) => session.cap(operation));
    evidence['capability_ids'] = found;
    const missing = expected.filter((id) => !found.includes(id));
    const extra = found.filter((id) => !expected.includes(id));
    if (missing.length > 0 || extra.length > 0 || found.length !== expected.length) {
      throw new CheckFailed(`expected exactly ${expected.length} capability ids for endpoint ${session.endpoint.id}; missing: ${missing.join(', ') || 'none'}; unexpected: ${extra.join(', ') || 'none'}`);
    }

    const contracts: Record<string, unknown> = {};
    evidence['contracts'] = contracts;
    for (const operation of OPERATION_NAMES) {
      const capability = session.connector.capability(session.cap(operation));
      const published = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'contracts', `${operation}.json`), 'utf8')) as { contract: unknown };
      if (!capability) throw new CheckFailed(`capability ${session.cap(operation)} is in the manifest but cannot be resolved`);
      if (canonicalJson(capability.contract) !== canonicalJson(published.contract)) {
        throw new CheckFailed(`the contract of ${capability.id} differs from contracts/${operation}.json`);
      }
      const binding = capability.bindings[0];
      if (capability.bindings.length !== 1 || binding?.endpoint_id !== session.endpoint.id || binding.operation !== operation) {
        throw new CheckFailed(`${capability.id} is not bound to endpoint ${session.endpoint.id} and operation ${operation}`);
      }
      contracts[capability.id] = {
        contract_sha256: sha256(canonicalJson(capability.contract)),
        risk: capability.risk,
        requires_human_approval: capability.requires_human_approval,
        binding: `${binding.method} ${binding.path}`,
      };
    }
  },
};
