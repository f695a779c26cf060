import { afterEach, describe, expect, it } from 'vitest';
import { runConformanceKit } from '../../src/conformance/kit/run.js';
import { scenarioTrigger, WEBHOOK_PROFILE } from '../../src/conformance/kit/triggers.js';
import { REQUIRED_ASSERTIONS, SCENARIO_IDS, systemClock } from '../../src/conformance/kit/types.js';
import { simulatedTarget, type SimulatedTarget } from './helpers.js';

let target: SimulatedTarget | undefined;
afterEach(async () => {
  await target?.close();
  target = undefined;
});

describe('the conformance kit against the simulator', { timeout: 60_000 }, () => {
  for (const profile of ['pin', 'later'] as const) {
    it(`profile ${profile}: admission and every triggered scenario pass; transaction and webhook are not applicable by the manifest`, async () => {
      target = await simulatedTarget(profile);
      const report = await runConformanceKit(target.driver, systemClock);
      expect(report.checks.map((check) => check.id)).toEqual(['connector.atomic_manifest_admission', ...SCENARIO_IDS.map((id) => `connector.behavior.${id}`)]);
      for (const check of report.checks) {
        const scenario = check.id.replace('connector.behavior.', '') as (typeof SCENARIO_IDS)[number];
        if (check.verdict === 'not_applicable') {
          expect(['transaction_lifecycle', 'webhook_security']).toContain(scenario);
          continue;
        }
        expect(check.verdict, `${check.id}: ${check.reason}`).toBe('passed');
        if (check.id === 'connector.atomic_manifest_admission') continue;
        expect(check.assertions.map((assertion) => assertion.name)).toEqual(REQUIRED_ASSERTIONS[scenario]);
        expect(check.artifacts.length).toBeGreaterThan(0);
      }
      expect(report.checks.find((check) => check.id.endsWith('transaction_lifecycle'))?.reason).toBe(
        'not applicable: no capability of the manifest declares a `transaction` contract',
      );
      expect(report.checks.find((check) => check.id.endsWith('webhook_security'))?.reason).toContain(`is ${WEBHOOK_PROFILE}`);
      expect(report.passed).toBe(true);

      // The declared contracts break one enterprise rule, and the kit says so instead of hiding it.
      const enterprise = report.staticChecks.find((check) => check.id === 'enterprise.capability_contract');
      expect(enterprise?.passed).toBe(false);
      expect(enterprise?.findings).toEqual([
        expect.stringMatching(
          /^cap:hermes_agent:simulator:run_status: mutating contract must require idempotency \(side effects external_network with idempotency optional\)$/,
        ),
        expect.stringMatching(/^cap:hermes_agent:simulator:run_events: mutating contract must require idempotency/),
      ]);
      // Every request the kit saw was made with the configured key, and nothing the kit retains holds it.
      expect(JSON.stringify(report)).not.toContain('hk_conformance_test');
    });
  }

  it('a manifest that advertises the webhook profile requires webhook_security, and a connector without it fails', async () => {
    target = await simulatedTarget();
    const manifest = target.driver.manifest();
    const withWebhook = { ...manifest, profiles: [...manifest.profiles, WEBHOOK_PROFILE] };
    expect(scenarioTrigger(withWebhook, 'webhook_security').required).toBe(true);
    const driver = { ...target.driver, manifest: () => withWebhook, exercise: target.driver.exercise };
    const report = await runConformanceKit(driver, systemClock);
    const webhook = report.checks.find((check) => check.id.endsWith('webhook_security'));
    expect(webhook?.verdict).toBe('failed');
    expect(webhook?.reason).toContain('has no webhook_security scenario');
    expect(report.passed).toBe(false);
  });

  it('admission fails when the connector does not claim what a contract flag promises', async () => {
    target = await simulatedTarget();
    const honest = target.driver;
    const driver = {
      ...honest,
      implementationSupport: (id: string) => ({ ...honest.implementationSupport(id), streaming: false }),
      exercise: async () => Promise.reject(new Error('not run')),
    };
    const report = await runConformanceKit(driver, systemClock);
    const admission = report.checks[0];
    expect(admission?.verdict).toBe('failed');
    expect(admission?.reason).toBe('cap:hermes_agent:simulator:run_events declares supports_streaming but the connector does not claim streaming support');
  });
});
