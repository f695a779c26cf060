import type { AipManifest } from '../../types.js';
import { projectedName } from './admission.js';
import { WEBHOOK_PROFILE } from './triggers.js';
import type { StaticCheck } from './types.js';

/**
 * The reference kit's manifest-level report (its gateway report), restated. The behaviour kit does
 * not run these: they are reported beside the thirteen checks and do not decide the exit code.
 */
export function staticChecks(manifest: AipManifest): StaticCheck[] {
  return [
    check('discovery.manifest', manifestProblems(manifest)),
    check(
      'discovery.profile_set',
      manifest.profiles.filter((profile) => profile.trim() === '').map(() => 'a profile id is empty'),
    ),
    check('discovery.profile_bindings', profileBindingProblems(manifest)),
    check('enterprise.capability_contract', manifest.capabilities.flatMap(enterpriseProblems)),
    check('profile.mcp.tools_list', mcpProjectionProblems(manifest)),
  ];
}

function check(id: string, findings: string[]): StaticCheck {
  return { id, passed: findings.length === 0, findings };
}

function manifestProblems(manifest: AipManifest): string[] {
  const problems: string[] = [];
  if (manifest.manifest_version.trim() === '') problems.push('manifest_version is empty');
  if (manifest.profiles.length === 0) problems.push('profiles must not be empty');
  for (const capability of manifest.capabilities) {
    if (capability.name.trim() === '') problems.push(`${capability.id} has an empty name`);
    if (typeof capability.input_schema !== 'object' || capability.input_schema === null || Array.isArray(capability.input_schema)) {
      problems.push(`${capability.id} input_schema is not a JSON object`);
    }
  }
  return problems;
}

/** Each advertised transport profile needs the compatibility paths a peer would use. */
const PROFILE_PATHS: Record<string, string[][]> = {
  'aip.native.http.v1': [
    ['native_http', 'messages'],
    ['native_http', 'manifest'],
  ],
  'aip.native.nats.v1': [['native_nats', 'subject']],
  'aip.mcp.compat.v1': [['mcp', 'jsonrpc']],
  'aip.a2a.compat.v1': [
    ['a2a', 'agent_card'],
    ['a2a', 'jsonrpc'],
  ],
};

function profileBindingProblems(manifest: AipManifest): string[] {
  const problems: string[] = [];
  for (const profile of manifest.profiles) {
    const missing = (PROFILE_PATHS[profile] ?? []).filter((path) => !nonEmptyString(path, manifest.compatibility));
    if (missing.length > 0) problems.push(`${profile} requires compatibility.${missing.map((path) => path.join('.')).join(' and compatibility.')}`);
    if (profile === WEBHOOK_PROFILE && !('channels' in manifest)) problems.push(`${WEBHOOK_PROFILE} requires at least one channel descriptor`);
  }
  return problems;
}

function nonEmptyString(path: string[], root: unknown): boolean {
  const value = path.reduce<unknown>((node, key) => (node !== null && typeof node === 'object' ? (node as Record<string, unknown>)[key] : undefined), root);
  return typeof value === 'string' && value.trim() !== '';
}

interface EnterpriseContract {
  side_effects?: string[];
  idempotency?: { requirement?: string };
  execution?: { supports_sync?: boolean; supports_async?: boolean; supports_streaming?: boolean; supports_retry?: boolean; retry_safety?: string };
  approval?: { required?: boolean; evidence_requirements?: string[] };
  data?: { contains_pii?: boolean; sensitivity?: string; redaction_required?: boolean };
  credentials?: { required?: boolean; required_scopes?: string[]; accepted_issuers?: string[] } | null;
  transaction?: { supported_modes?: string[] } | null;
  compensation?: { mode?: string; compensation_capability_id?: string };
}

const APPROVAL_SIDE_EFFECTS = new Set(['financial', 'legal', 'medical', 'identity', 'delete', 'send_message']);

/** Capability Contract 2.0's enterprise rules, one finding per broken rule and capability. */
function enterpriseProblems(capability: { id: string; contract: Record<string, unknown> }): string[] {
  const c = capability.contract as EnterpriseContract;
  const sideEffects = c.side_effects ?? [];
  const execution = c.execution ?? {};
  const rules: Array<[boolean, string]> = [
    [sideEffects.length === 0, 'contract side_effects is empty'],
    [!execution.supports_sync && !execution.supports_async && !execution.supports_streaming, 'contract execution supports no invocation mode'],
    [
      c.idempotency?.requirement === 'required' &&
        !execution.supports_retry &&
        (execution.retry_safety === 'safe' || execution.retry_safety === 'safe_with_idempotency_key'),
      'contract declares retry safety without retry support',
    ],
    [c.approval?.required === true && (c.approval.evidence_requirements ?? []).length === 0, 'approval policy should declare evidence requirements'],
    [
      (c.data?.contains_pii === true || c.data?.sensitivity === 'restricted' || c.data?.sensitivity === 'regulated') && c.data.redaction_required !== true,
      'restricted, regulated, or PII-bearing contract must require redaction',
    ],
    [c.credentials?.required === true && (c.credentials.required_scopes ?? []).length === 0, 'required credential policy should declare required scopes'],
    [(c.credentials?.accepted_issuers ?? []).some((issuer) => issuer.trim() === ''), 'credential policy has an empty accepted issuer'],
    [(c.credentials?.required_scopes ?? []).some((scope) => scope.trim() === ''), 'credential policy has an empty required scope'],
    [
      sideEffects.some((effect) => effect !== 'read') && c.idempotency?.requirement !== 'required',
      `mutating contract must require idempotency (side effects ${sideEffects.filter((effect) => effect !== 'read').join(', ')} with idempotency ${c.idempotency?.requirement ?? 'absent'})`,
    ],
    [
      sideEffects.some((effect) => APPROVAL_SIDE_EFFECTS.has(effect)) && c.approval?.required !== true,
      'regulated or externally visible side effects must require approval',
    ],
    [
      c.transaction !== undefined && c.transaction !== null && (c.transaction.supported_modes ?? []).length === 0,
      'transaction contract has no supported modes',
    ],
    [
      (c.transaction?.supported_modes ?? []).includes('commit') && !(c.transaction?.supported_modes ?? []).includes('plan'),
      'commit support must also publish plan support',
    ],
    [
      c.compensation?.mode === 'supported' && c.compensation.compensation_capability_id === undefined,
      'compensation is supported but no compensation capability is declared',
    ],
  ];
  return rules.filter(([broken]) => broken).map(([, finding]) => `${capability.id}: ${finding}`);
}

/** Every capability projects to one named MCP tool. */
function mcpProjectionProblems(manifest: AipManifest): string[] {
  const names = manifest.capabilities.map((capability) => projectedName(capability.id));
  return names.filter((name) => name === '').map(() => 'a capability projects to a tool without a name');
}
