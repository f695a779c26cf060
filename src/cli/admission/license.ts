/**
 * The license policy over an SBOM: every component's declared licenses must be allowed. A CycloneDX component lists
 * licenses (`{license: {id | name}}`, all of which apply) or an SPDX expression (`MIT OR Apache-2.0`, parsed with
 * spdx-expression-parse); a Debian license name that is not SPDX (`GPL-2+`) is matched as written.
 */
import parseSpdx, { type ExpressionNode } from 'spdx-expression-parse';
import { isRecord } from './inputs.js';

export interface LicenseResult {
  checked: number;
  /** Components accepted whatever their license, by the policy's `accept_components` (purl and reason). */
  accepted: string[];
  violations: Array<{ component: string; reason: string }>;
}

interface Policy {
  allowed: ReadonlySet<string>;
  acceptedPurls: ReadonlySet<string>;
}

/** The policy's result over the SBOM's components (nested ones included), or why the policy file is unusable. */
export function licenseViolations(sbom: unknown, policyFile: unknown): LicenseResult | string {
  const policy = readPolicy(policyFile);
  if (typeof policy === 'string') return policy;
  const result: LicenseResult = { checked: 0, accepted: [], violations: [] };
  for (const component of componentsOf(sbom)) {
    result.checked++;
    const name = componentName(component);
    if (typeof component['purl'] === 'string' && policy.acceptedPurls.has(component['purl'])) {
      result.accepted.push(name);
      continue;
    }
    const reason = licenseProblem(component['licenses'], policy.allowed);
    if (reason !== undefined) result.violations.push({ component: name, reason });
  }
  return result;
}

function readPolicy(file: unknown): Policy | string {
  const licenses = isRecord(file) ? file['licenses'] : undefined;
  const exceptions = isRecord(file) ? (file['accept_components'] ?? []) : undefined;
  const validException = (item: unknown): boolean =>
    isRecord(item) && typeof item['purl'] === 'string' && typeof item['reason'] === 'string' && item['reason'] !== '';
  if (!Array.isArray(licenses) || !licenses.every((item) => typeof item === 'string') || !Array.isArray(exceptions) || !exceptions.every(validException)) {
    return '--license-policy must hold "licenses" (an array of license ids or names) and optionally "accept_components" ([{ "purl", "reason" }])';
  }
  return { allowed: new Set(licenses as string[]), acceptedPurls: new Set((exceptions as Array<{ purl: string }>).map((item) => item.purl)) };
}

function* componentsOf(node: unknown): Generator<Record<string, unknown>> {
  const components = isRecord(node) ? node['components'] : undefined;
  if (!Array.isArray(components)) return;
  for (const component of components) {
    if (!isRecord(component)) continue;
    yield component;
    yield* componentsOf(component);
  }
}

function componentName(component: Record<string, unknown>): string {
  if (typeof component['purl'] === 'string') return component['purl'];
  return `${String(component['name'])}@${String(component['version'])}`;
}

function licenseProblem(licenses: unknown, allowed: ReadonlySet<string>): string | undefined {
  if (!Array.isArray(licenses) || licenses.length === 0) return 'declares no license';
  const terms = licenses.map(licenseTerm);
  const refused = terms.filter((term) => term === undefined || !termAllowed(term, allowed));
  return refused.length === 0 ? undefined : `not allowed: ${terms.map((term) => term ?? 'an unreadable license entry').join(', ')}`;
}

function licenseTerm(entry: unknown): string | undefined {
  if (!isRecord(entry)) return undefined;
  if (typeof entry['expression'] === 'string') return entry['expression'];
  const license = entry['license'];
  if (!isRecord(license)) return undefined;
  const term = license['id'] ?? license['name'];
  return typeof term === 'string' ? term : undefined;
}

function termAllowed(term: string, allowed: ReadonlySet<string>): boolean {
  if (allowed.has(term)) return true;
  let expression: ExpressionNode;
  try {
    expression = parseSpdx(term);
  } catch {
    return false;
  }
  return expressionAllowed(expression, allowed);
}

function expressionAllowed(node: ExpressionNode, allowed: ReadonlySet<string>): boolean {
  if ('license' in node) return allowed.has(`${node.license}${node.plus ? '+' : ''}${node.exception ? ` WITH ${node.exception}` : ''}`);
  const left = expressionAllowed(node.left, allowed);
  const right = expressionAllowed(node.right, allowed);
  return node.conjunction === 'or' ? left || right : left && right;
}
