import { Ajv2020 } from 'ajv/dist/2020.js';
import type { AipCapability, AipManifest, ImplementationSupport } from '../../types.js';

/**
 * The reference runtime's atomic manifest admission, restated: a manifest is admitted whole or not
 * at all. Returns every problem found (empty: admitted).
 */
export function admissionProblems(manifest: AipManifest, support: (capabilityId: string) => ImplementationSupport): string[] {
  return [
    ...duplicateIds(manifest),
    ...manifest.capabilities.flatMap((capability) => [
      ...executionModeProblems(capability),
      ...schemaProblems(capability),
      ...bindingProblems(capability, manifest.profiles),
      ...claimProblems(capability, support(capability.id)),
    ]),
    ...projectedNameCollisions(manifest),
  ];
}

/** The reference projection of an id to a profile name (e.g. an MCP tool name). */
export function projectedName(capabilityId: string): string {
  return capabilityId
    .toLowerCase()
    .replace(/[^a-z0-9.-]/g, '_')
    .slice(0, 128);
}

function duplicateIds(manifest: AipManifest): string[] {
  const seen = new Set<string>();
  const problems: string[] = [];
  for (const { id } of manifest.capabilities) {
    if (seen.has(id)) problems.push(`capability id ${id} is published twice`);
    seen.add(id);
  }
  return problems;
}

function projectedNameCollisions(manifest: AipManifest): string[] {
  const owners = new Map<string, string>();
  const problems: string[] = [];
  for (const { id } of manifest.capabilities) {
    const name = projectedName(id);
    const owner = owners.get(name);
    if (owner !== undefined && owner !== id) problems.push(`${id} and ${owner} project to the same profile name ${name}`);
    owners.set(name, id);
  }
  return problems;
}

interface Execution {
  supports_sync?: boolean;
  supports_async?: boolean;
  supports_streaming?: boolean;
  supports_cancel?: boolean;
  supports_retry?: boolean;
}

interface AdmissionContract {
  execution?: Execution;
  transaction?: { supported_modes?: string[] } | null;
  compensation?: { mode?: string };
  approval?: { required?: boolean };
  credentials?: { required?: boolean } | null;
}

function executionModeProblems(capability: AipCapability): string[] {
  const execution = (capability.contract as AdmissionContract).execution ?? {};
  return execution.supports_sync || execution.supports_async || execution.supports_streaming ? [] : [`${capability.id} declares no execution mode`];
}

function schemaProblems(capability: AipCapability): string[] {
  const problems: string[] = [];
  for (const [name, schema] of [
    ['input_schema', capability.input_schema],
    ['output_schema', capability.output_schema],
  ] as const) {
    for (const ref of remoteRefs(schema)) problems.push(`${capability.id} ${name} has a non-fragment $ref ${ref}`);
    try {
      // A fresh compiler per schema: each must compile on its own, with nothing else loaded.
      new Ajv2020({ strict: false, validateFormats: false }).compile(schema);
    } catch (error) {
      problems.push(`${capability.id} ${name} does not compile under JSON Schema 2020-12: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  return problems;
}

function remoteRefs(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(remoteRefs);
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([key, item]) => (key === '$ref' && typeof item === 'string' && !item.startsWith('#') ? [item] : remoteRefs(item)));
}

function bindingProblems(capability: AipCapability, profiles: string[]): string[] {
  return capability.bindings
    .filter((binding) => !profiles.includes(binding.profile))
    .map((binding) => `${capability.id} binds profile ${binding.profile}, which the manifest does not declare`);
}

/** Every flag a contract raises needs the matching implementation claim. */
function claimProblems(capability: AipCapability, support: ImplementationSupport): string[] {
  const contract = capability.contract as AdmissionContract;
  const execution = contract.execution ?? {};
  const claims: Array<[boolean, keyof ImplementationSupport, string]> = [
    [true, 'invocation', 'is callable'],
    [execution.supports_cancel === true, 'cancellation', 'declares supports_cancel'],
    [execution.supports_streaming === true, 'streaming', 'declares supports_streaming'],
    [execution.supports_retry === true, 'retry', 'declares supports_retry'],
    [contract.transaction !== undefined && contract.transaction !== null, 'transaction', 'declares a transaction contract'],
    [contract.transaction?.supported_modes?.includes('reconcile') === true, 'reconciliation', 'declares the reconcile transaction mode'],
    [contract.compensation?.mode === 'supported', 'compensation', 'declares supported compensation'],
    [contract.approval?.required === true, 'approval', 'requires approval'],
    [contract.credentials?.required === true, 'credentials', 'requires credentials'],
  ];
  return claims
    .filter(([raised, flag]) => raised && !support[flag])
    .map(([, flag, what]) => `${capability.id} ${what} but the connector does not claim ${flag} support`);
}
