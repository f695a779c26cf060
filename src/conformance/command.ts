import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { HELP_OPTION, integerOption, parseCommand, simulatorChoice } from '../cli/args.js';
import { loadConfig, type LoadedConfig, type LoadedEndpoint } from '../cli/config.js';
import { EXIT } from '../cli/errors.js';
import { duration } from '../cli/format.js';
import { CONFORMANCE_HELP } from '../cli/help.js';
import { credentialRevision } from '../config.js';
import { artifactIdentities } from '../cli/identities.js';
import type { HermesSimulator } from '../simulator/index.js';
import { startEmbeddedSimulator } from '../cli/embedded-simulator.js';
import { jsonDocument, writeArtifacts } from '../cli/artifacts.js';
import { renderConformanceReport } from './report-html.js';
import { CONFORMANCE_SCHEMA_ID, STATIC_CHECKS_READING, summarize, type ConformanceArtifact, type EndpointConformance } from './artifact.js';
import { createHermesDriver } from './hermes/driver.js';
import type { ProviderAccess, RunBodies } from './hermes/harness.js';
import { runBodies } from './hermes/run-bodies.js';
import { runConformanceKit } from './kit/run.js';
import { systemClock, type BehaviourCheck } from './kit/types.js';

const LABEL: Record<BehaviourCheck['verdict'], string> = { passed: 'PASS', failed: 'FAIL', not_applicable: 'N/A ' };

export async function conformanceCommand(args: string[]): Promise<number> {
  const { values } = parseCommand('conformance', args, (argv) =>
    parseArgs({
      args: argv,
      strict: true,
      options: {
        config: { type: 'string' },
        out: { type: 'string' },
        simulate: { type: 'boolean' },
        profile: { type: 'string' },
        timeout: { type: 'string' },
        help: HELP_OPTION,
      },
    }),
  );
  if (values.help) {
    process.stdout.write(CONFORMANCE_HELP);
    return EXIT.ok;
  }
  const profile = simulatorChoice('conformance', values) ?? 'pin';
  const stepTimeoutMs = (integerOption(values.timeout, 'timeout', 1, 3600) ?? (values.simulate ? 10 : 120)) * 1000;
  const loaded = values.simulate ? undefined : loadConfig(values.config);

  const startedAt = Date.now();
  let simulator: HermesSimulator | undefined;
  let target: LoadedConfig;
  if (loaded) target = loaded;
  else ({ simulator, config: target } = await startEmbeddedSimulator(profile));
  const bodies = runBodies(simulator !== undefined);
  const endpoints: EndpointConformance[] = [];
  try {
    for (const endpoint of target.endpoints) {
      process.stdout.write(
        `hermes-aip conformance: 13 behaviour checks against endpoint ${endpoint.config.id}${simulator ? ` (embedded simulator, profile ${profile})` : ''}\n`,
      );
      endpoints.push(await checkEndpoint(endpoint, { bodies, stepTimeoutMs, simulated: simulator !== undefined }));
    }
  } finally {
    await simulator?.close();
  }
  const finishedAt = Date.now();
  const summary = summarize(endpoints);
  const artifact: ConformanceArtifact = {
    $schema: CONFORMANCE_SCHEMA_ID,
    conformance_id: `conf_${randomBytes(12).toString('hex')}`,
    result: summary.failed === 0 ? 'passed' : 'failed',
    started_at: new Date(startedAt).toISOString(),
    finished_at: new Date(finishedAt).toISOString(),
    duration_ms: finishedAt - startedAt,
    target: {
      kind: simulator ? 'simulator' : 'configured',
      config_source: target.source,
      simulator_profile: simulator ? profile : null,
      evidence_source: simulator ? 'deterministic_provider_double' : 'isolated_live_provider',
      note: simulator
        ? 'Exercised against the embedded Hermes simulator, a clean-room model of the pinned revision, through the kit’s recording proxy: evidence about the connector, not about a live Hermes deployment.'
        : 'Exercised against the configured endpoints through the kit’s recording proxy: the evidence holds for these endpoints, credential revisions and connector revision at the recorded times.',
    },
    identities: artifactIdentities(),
    static_checks_reading: STATIC_CHECKS_READING,
    endpoints,
    summary,
  };
  process.stdout.write(
    `\nConformance ${artifact.result.toUpperCase()}: ${summary.passed} passed, ${summary.not_applicable} not applicable, ${summary.failed} failed of ${summary.checks} checks; ${summary.static_findings} static finding(s) reported; ${duration(artifact.duration_ms)}\n`,
  );
  if (values.out !== undefined) {
    const [jsonPath, htmlPath] = writeArtifacts(
      values.out,
      [
        ['conformance.json', jsonDocument(artifact)],
        ['conformance.html', renderConformanceReport(artifact)],
      ],
      'the conformance artifact',
    );
    process.stdout.write(`Artifact: ${jsonPath}\nReport:   ${htmlPath}\n`);
  }
  return artifact.result === 'passed' ? EXIT.ok : EXIT.failed;
}

async function checkEndpoint(
  endpoint: LoadedEndpoint,
  settings: { bodies: RunBodies; stepTimeoutMs: number; simulated: boolean },
): Promise<EndpointConformance> {
  const { config } = endpoint;
  const provider: ProviderAccess = {
    baseUrl: config.baseUrl,
    apiKey: config.apiKey,
    endpointId: config.id,
    source: settings.simulated ? 'deterministic_provider_double' : 'isolated_live_provider',
    bodies: settings.bodies,
    stepTimeoutMs: settings.stepTimeoutMs,
    pollMs: settings.simulated ? 20 : 250,
    ...(config.tenantId !== undefined ? { tenantId: config.tenantId } : {}),
    ...(config.displayName !== undefined ? { displayName: config.displayName } : {}),
  };
  const startedAt = Date.now();
  const driver = await createHermesDriver({ provider, clock: systemClock });
  let report: Awaited<ReturnType<typeof runConformanceKit>>;
  try {
    report = await runConformanceKit(driver, systemClock, {
      checkFinished: (check) => process.stdout.write(`  ${LABEL[check.verdict]} ${check.id}${check.verdict === 'failed' ? `: ${check.reason}` : ''}\n`),
    });
  } finally {
    await driver.close();
  }
  const finishedAt = Date.now();
  for (const check of report.staticChecks) {
    process.stdout.write(
      `  static ${check.passed ? 'PASS' : 'FAIL'} ${check.id}${check.passed ? '' : ` (${check.findings.length} finding(s), reported only)`}\n`,
    );
  }
  return {
    endpoint_id: config.id,
    display_name: config.displayName ?? null,
    base_url: config.baseUrl,
    tenant_binding: config.tenantId ?? null,
    credential_revision: credentialRevision(config.apiKey),
    credential_source: endpoint.keySource,
    result: report.passed ? 'passed' : 'failed',
    started_at: new Date(startedAt).toISOString(),
    finished_at: new Date(finishedAt).toISOString(),
    duration_ms: finishedAt - startedAt,
    checks: report.checks,
    static_checks: report.staticChecks,
  };
}
