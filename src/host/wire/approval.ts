/**
 * The route's `approval_authorization` check, as the reference host runs it before executing an approved action
 * (`validate_route_approval_authorization`, aip-connector-host) including `ApprovalRecord::validate_importable_authorization`
 * (aip-runtime): the record must be approved, carry the action's own decision, match action, capability, tenant and
 * policy hash, and replaying its `decisions` from an empty pending record must reproduce its status, `decision` and
 * `decisions` exactly. Typed equality is compared on the reference re-serialisation (canonical JSON).
 */
import { createHash } from 'node:crypto';
import { canonicalJson, type Json } from './json.js';
import { reserialize } from './reference-types.js';
import { parseRfc3339 } from './time.js';

type Obj = { [k: string]: Json };
type Status = 'pending' | 'approved' | 'denied' | 'expired' | 'revoked';

interface Authority {
  principal_id: string;
  tenant_id: string | null;
  roles: string[];
  groups: string[];
  tenant_policies: string[];
  external_systems: string[];
  delegated_scopes: { scope: string; expires_at: string; max_risk_rank: number | null; max_value: number | null; revoked: boolean }[];
}

interface Verified {
  decision: Obj & { approval_id: string; decision: string; decision_id?: string; policy_hash?: string };
  authority: Authority;
}

interface Request {
  id: string;
  action_id: string;
  capability_id: string;
  approver_selector: Obj;
  identity?: { tenant?: { id: string } };
  policy_snapshot?: { minimum_distinct_principals: number; rule?: Obj };
  policy_hash?: string;
  risk?: string;
  governed_value?: number;
}

interface ApprovalRecord {
  request: Request;
  status: Status;
  decision?: Obj;
  decisions?: Verified[];
}

const same = (a: unknown, b: unknown): boolean => canonicalJson(a) === canonicalJson(b);

const RISK_RANK: Record<string, number> = { low: 1, medium: 2, high: 3, critical: 4 };

function delegatedAuthorityMatches(rule: Obj, authority: Authority, request: Request, nowMs: number): boolean {
  const risk = request.risk === undefined ? undefined : RISK_RANK[request.risk];
  const value = request.governed_value;
  const maxRisk = typeof rule['max_risk'] === 'string' ? RISK_RANK[rule['max_risk']] : undefined;
  const maxValue = typeof rule['max_value'] === 'number' ? rule['max_value'] : undefined;
  return authority.delegated_scopes.some(
    (grant) =>
      !grant.revoked &&
      grant.scope === rule['scope'] &&
      (parseRfc3339(grant.expires_at) ?? 0) > nowMs &&
      (grant.max_risk_rank === null || risk === undefined || risk <= grant.max_risk_rank) &&
      (maxRisk === undefined || risk === undefined || risk <= maxRisk) &&
      (grant.max_value === null || value === undefined || value <= grant.max_value) &&
      (maxValue === undefined || value === undefined || value <= maxValue),
  );
}

/** `authority_matches_rule`: a leaf rule against one resolver-verified authority. */
function authorityMatchesRule(rule: Obj, authority: Authority, request: Request, nowMs: number): boolean {
  switch (rule['operator']) {
    case 'principal':
      return authority.principal_id === rule['id'];
    case 'role':
      return authority.roles.includes(rule['name'] as string);
    case 'group':
      return authority.groups.includes(rule['name'] as string);
    case 'tenant_policy':
      return authority.tenant_policies.includes(rule['policy_id'] as string);
    case 'external_system':
      return authority.external_systems.includes(rule['system'] as string);
    case 'delegated_authority':
      return delegatedAuthorityMatches(rule, authority, request, nowMs);
    default:
      return false;
  }
}

/**
 * `authority_matches_selector`: the request's `approver_selector` when the policy has no rule. Its principal, role,
 * group and external-system variants match exactly as the same-named rules do; `tenant_policy` (no id) matches any
 * tenant policy, or an authority of the request's tenant.
 */
function authorityMatchesSelector(selector: Obj, authority: Authority, request: Request): boolean {
  const { type, ...fields } = selector;
  if (type !== 'tenant_policy') return type !== 'delegated_authority' && authorityMatchesRule({ operator: type ?? null, ...fields }, authority, request, 0);
  const tenant = request.identity?.tenant?.id;
  return authority.tenant_policies.length > 0 || (tenant !== undefined && authority.tenant_id === tenant);
}

type MatchSet = ReadonlySet<number>;

const setKey = (set: MatchSet): string => [...set].sort((a, b) => a - b).join(',');

function uniqueSets(sets: MatchSet[]): MatchSet[] {
  const seen = new Map<string, MatchSet>();
  for (const set of sets) if (!seen.has(setKey(set))) seen.set(setKey(set), set);
  return [...seen.values()];
}

/** The sets of approvals (by index) that satisfy `rule` (`approval_rule_match_sets`). */
function ruleMatchSets(rule: Obj, approvals: Verified[], request: Request, nowMs: number): MatchSet[] {
  const children = (rule['rules'] ?? []) as Obj[];
  switch (rule['operator']) {
    case 'all':
      return allMatchSets(children, rule['allow_decision_reuse'] === true, approvals, request, nowMs);
    case 'any':
      return uniqueSets(children.flatMap((child) => ruleMatchSets(child, approvals, request, nowMs)));
    case 'quorum': {
      const candidates = approvals.flatMap((verified, index) =>
        children.some((child) => authorityMatchesRule(child, verified.authority, request, nowMs)) ? [index] : [],
      );
      return quorumMatchSets(candidates, approvals, rule['required'] as number, rule['distinct_principals'] !== false);
    }
    default:
      return approvals.flatMap((verified, index) => (authorityMatchesRule(rule, verified.authority, request, nowMs) ? [new Set([index])] : []));
  }
}

function sharesPrincipal(left: MatchSet, right: MatchSet, approvals: Verified[]): boolean {
  return [...left].some((l) => [...right].some((r) => approvals[l]?.authority.principal_id === approvals[r]?.authority.principal_id));
}

function allMatchSets(children: Obj[], allowReuse: boolean, approvals: Verified[], request: Request, nowMs: number): MatchSet[] {
  let combinations: MatchSet[] = [new Set()];
  for (const child of children) {
    const childMatches = ruleMatchSets(child, approvals, request, nowMs);
    const next: MatchSet[] = [];
    for (const existing of combinations) {
      for (const candidate of childMatches) {
        const overlaps = [...candidate].some((index) => existing.has(index)) || sharesPrincipal(existing, candidate, approvals);
        if (!allowReuse && overlaps) continue;
        next.push(new Set([...existing, ...candidate]));
      }
    }
    combinations = uniqueSets(next);
    if (combinations.length === 0) break;
  }
  return combinations;
}

function quorumMatchSets(candidates: number[], approvals: Verified[], required: number, distinct: boolean): MatchSet[] {
  const found: MatchSet[] = [];
  const choose = (offset: number, selected: number[]): void => {
    if (selected.length === required) {
      found.push(new Set(selected));
      return;
    }
    if (selected.length + candidates.length - offset < required) return;
    for (let i = offset; i < candidates.length; i++) {
      const candidate = candidates[i] as number;
      const principal = approvals[candidate]?.authority.principal_id;
      if (distinct && selected.some((index) => approvals[index]?.authority.principal_id === principal)) continue;
      choose(i + 1, [...selected, candidate]);
    }
  };
  choose(0, []);
  return found;
}

/** `evaluate_approval_status`: a revocation, expiry or denial wins; else the distinct-principal minimum and the rule (or selector). */
function evaluateStatus(request: Request, decisions: Verified[], nowMs: number): Status {
  for (const kind of ['revoked', 'expired', 'denied'] as const) {
    if (decisions.some((verified) => verified.decision.decision === kind)) return kind;
  }
  const approvals = decisions.filter((verified) => verified.decision.decision === 'approved');
  const policy = request.policy_snapshot;
  const requiredDistinct = Math.max(policy?.minimum_distinct_principals ?? 1, 1);
  if (new Set(approvals.map((verified) => verified.authority.principal_id)).size < requiredDistinct) return 'pending';
  const satisfied =
    policy?.rule !== undefined
      ? ruleMatchSets(policy.rule, approvals, request, nowMs).length > 0
      : approvals.some((verified) => authorityMatchesSelector(request.approver_selector, verified.authority, request));
  return satisfied ? 'approved' : 'pending';
}

/** `terminal_approval_decision`: the last decision of the kind the status names. */
function terminalDecision(status: Status, decisions: Verified[]): Obj | undefined {
  if (status === 'pending') return undefined;
  return [...decisions].reverse().find((verified) => verified.decision.decision === status)?.decision;
}

/** `decision_replay_matches`: the same decision id, or (without ids) the same decision. */
function replayMatches(left: Verified['decision'], right: Verified['decision']): boolean {
  return left.decision_id !== undefined && right.decision_id !== undefined ? left.decision_id === right.decision_id : same(left, right);
}

/** Replays `decisions` from an empty pending record (`apply_verified_decision` in turn); a reason when a step refuses. */
function replayProblem(record: ApprovalRecord, nowMs: number): string | undefined {
  const { request } = record;
  let status: Status = 'pending';
  let decision: Obj | undefined;
  const applied: Verified[] = [];
  for (const verified of record.decisions ?? []) {
    if (verified.decision.approval_id !== request.id || verified.decision.policy_hash !== request.policy_hash) return 'contains an unrelated decision';
    const earlier = applied.find((existing) => replayMatches(existing.decision, verified.decision));
    if (earlier !== undefined) {
      if (!same(earlier, verified)) return 'replays a decision id with different content';
      continue;
    }
    if (status !== 'pending') return 'has a decision after its terminal one';
    applied.push(verified);
    status = evaluateStatus(request, applied, nowMs);
    decision = terminalDecision(status, applied);
  }
  if (status !== 'approved' || !same(decision, record.decision) || !same(applied, record.decisions ?? [])) {
    return 'cannot reproduce its approved policy state';
  }
  return undefined;
}

/** `validate_importable_authorization`: approved, its decision approved and of this request and policy, decisions non-empty, replayable. */
function importableProblem(record: ApprovalRecord, nowMs: number): string | undefined {
  const { request, decision } = record;
  if (record.status !== 'approved' || decision === undefined || decision['decision'] !== 'approved') return 'is not an approved terminal authorization';
  if (decision['approval_id'] !== request.id || decision['policy_hash'] !== request.policy_hash) return 'is not an approved terminal authorization';
  if ((record.decisions ?? []).length === 0) return 'has no decisions to reproduce its approved state';
  return replayProblem(record, nowMs);
}

export type ApprovalCheck = { ok: true; record?: Json } | { ok: false; reason: string };

/**
 * Check 6b of the reference host for one action (its `approval` against the route's `approval_authorization`):
 * both absent is fine; one without the other, a malformed record, or any rule above failing is a refusal
 * (403 `connector_host.route_mismatch`). On success `record` is the record as the reference types re-serialise it.
 */
export function checkApprovalAuthorization(record: unknown, action: object, hostTenant: string, nowMs = Date.now()): ApprovalCheck {
  const approval = (action as { approval?: unknown }).approval;
  if (approval === undefined || approval === null)
    return record === undefined ? { ok: true } : { ok: false, reason: 'route carries unused approval authorization' };
  if (record === undefined) return { ok: false, reason: 'approved action is missing its approval authorization' };
  const typedDecision = reserialize.approvalDecision(approval);
  const typedRecord = reserialize.approvalRecord(record);
  if (!typedDecision.ok || !typedRecord.ok) return { ok: false, reason: 'approval authorization is malformed' };
  const decision = typedDecision.value as Obj;
  const parsed = typedRecord.value as unknown as ApprovalRecord;
  const { request } = parsed;
  const { id, capability_id } = action as { id?: unknown; capability_id?: unknown };
  const matches =
    decision['decision'] === 'approved' &&
    parsed.status === 'approved' &&
    same(parsed.decision, decision) &&
    request.id === decision['approval_id'] &&
    request.action_id === id &&
    request.capability_id === capability_id &&
    request.identity?.tenant?.id === hostTenant &&
    decision['policy_hash'] === request.policy_hash;
  if (!matches) return { ok: false, reason: 'approval authorization does not match the action, tenant, policy, or terminal decision' };
  const problem = importableProblem(parsed, nowMs);
  return problem === undefined ? { ok: true, record: typedRecord.value } : { ok: false, reason: `approval authorization ${problem}` };
}

/** A fingerprint of a checked record for the import store: the reference refuses a second, different record under one approval id. */
export function approvalRecordFingerprint(record: Json): string {
  return createHash('sha256').update(canonicalJson(record)).digest('hex');
}
