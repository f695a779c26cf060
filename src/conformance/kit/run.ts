import { admissionProblems } from './admission.js';
import { staticChecks } from './static-checks.js';
import { scenarioTrigger } from './triggers.js';
import {
  REQUIRED_ASSERTIONS,
  SCENARIO_IDS,
  type BehaviourCheck,
  type Clock,
  type ConformanceDriver,
  type ScenarioEvidence,
  type ScenarioId,
  type StaticCheck,
} from './types.js';

export const ADMISSION_CHECK_ID = 'connector.atomic_manifest_admission';

export interface KitReport {
  /** The thirteen behaviour checks: admission first, then the twelve scenarios in the reference order. */
  checks: BehaviourCheck[];
  staticChecks: StaticCheck[];
  /** True when every applicable behaviour check passed (static checks do not decide it). */
  passed: boolean;
}

export interface KitProgress {
  checkStarted?(id: string): void;
  checkFinished?(check: BehaviourCheck): void;
}

/** Runs admission, then every scenario the manifest triggers, and judges each by the reference kit's rules. */
export async function runConformanceKit(driver: ConformanceDriver, clock: Clock, progress: KitProgress = {}): Promise<KitReport> {
  const manifest = driver.manifest();
  const checks: BehaviourCheck[] = [];
  const record = (check: BehaviourCheck) => {
    checks.push(check);
    progress.checkFinished?.(check);
  };
  progress.checkStarted?.(ADMISSION_CHECK_ID);
  record(admissionCheck(driver));
  for (const scenario of SCENARIO_IDS) {
    const id = `connector.behavior.${scenario}`;
    progress.checkStarted?.(id);
    const trigger = scenarioTrigger(manifest, scenario);
    if (!trigger.required) {
      record(notApplicable(id, trigger.because));
      continue;
    }
    const startedAt = clock.now();
    let evidence: ScenarioEvidence | Error;
    try {
      evidence = await driver.exercise(scenario);
    } catch (error) {
      evidence = error instanceof Error ? error : new Error(String(error));
    }
    record(judge(id, scenario, trigger.because, evidence, clock.now() - startedAt));
  }
  return { checks, staticChecks: staticChecks(manifest), passed: checks.every((check) => check.verdict !== 'failed') };
}

function admissionCheck(driver: ConformanceDriver): BehaviourCheck {
  const manifest = driver.manifest();
  const problems = admissionProblems(manifest, (id) => driver.implementationSupport(id));
  return {
    id: ADMISSION_CHECK_ID,
    verdict: problems.length === 0 ? 'passed' : 'failed',
    trigger: 'every connector manifest is admitted atomically before any scenario',
    reason: problems.length === 0 ? `${manifest.capabilities.length} capabilities of ${driver.connectorId} admitted` : problems.join('; '),
    assertions: [
      {
        name: 'admitted',
        passed: problems.length === 0,
        reason:
          problems.length === 0
            ? 'unique ids, execution modes, 2020-12 schemas without remote $ref, declared binding profiles, no projected-name collision, a claim behind every contract flag'
            : problems.join('; '),
      },
    ],
    artifacts: manifest.capabilities.map((capability) => capability.id),
    host_roles: [],
    observations: { capabilities: manifest.capabilities.length, profiles: manifest.profiles },
    duration_ms: 0,
  };
}

function notApplicable(id: string, because: string): BehaviourCheck {
  return {
    id,
    verdict: 'not_applicable',
    trigger: because,
    reason: `not applicable: ${because}`,
    assertions: [],
    artifacts: [],
    host_roles: [],
    observations: {},
    duration_ms: 0,
  };
}

/** Every required assertion present and true, and at least one non-blank artifact id. */
function judge(id: string, scenario: ScenarioId, trigger: string, evidence: ScenarioEvidence | Error, durationMs: number): BehaviourCheck {
  if (evidence instanceof Error) {
    return {
      id,
      verdict: 'failed',
      trigger,
      reason: `the scenario could not be run: ${evidence.message}`,
      assertions: [],
      artifacts: [],
      host_roles: [],
      observations: {},
      duration_ms: durationMs,
    };
  }
  const required = REQUIRED_ASSERTIONS[scenario];
  const assertions = required.map((name) => {
    const outcome = evidence.assertions[name];
    return outcome ? { name, ...outcome } : { name, passed: false, reason: 'missing: the scenario did not observe it' };
  });
  const failed = assertions.filter((assertion) => !assertion.passed);
  const artifactsValid = evidence.artifacts.length > 0 && evidence.artifacts.every((artifact) => artifact.trim() !== '');
  const passed = failed.length === 0 && artifactsValid;
  const reason = passed
    ? evidence.detail
    : [...failed.map((assertion) => `${assertion.name}: ${assertion.reason}`), ...(artifactsValid ? [] : ['no artifact id was retained'])].join('; ');
  return {
    id,
    verdict: passed ? 'passed' : 'failed',
    trigger,
    reason,
    assertions,
    artifacts: evidence.artifacts,
    host_roles: evidence.hostRoles,
    observations: evidence.observations,
    duration_ms: durationMs,
  };
}
