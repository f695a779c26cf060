import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { HermesSimulator } from '../../simulator/index.js';
import { startEmbeddedSimulator } from '../embedded-simulator.js';
import { HELP_OPTION, fileErrorText, integerOption, parseCommand, simulatorChoice } from '../args.js';
import { openConnector, describeLedger, loadConfig } from '../config.js';
import { EXIT, UsageError } from '../errors.js';
import { jsonDocument, writeArtifacts } from '../artifacts.js';
import { renderReport } from '../report-html.js';
import { EVIDENCE_SCHEMA_ID, type EndpointRecord, type PromptRecord, type QualificationEvidence } from '../evidence.js';
import { QUALIFY_HELP } from '../help.js';
import { artifactIdentities, sha256 } from '../identities.js';
import { createProgress } from '../progress.js';
import { duration } from '../format.js';
import { onInterrupt } from '../signals.js';
import { APPROVAL_CHOICE } from './approvals.js';
import { CHECKS } from './index.js';
import { qualifyEndpoints } from './runner.js';
import type { QualifySettings } from './session.js';
import { simulatorScripts } from './simulator-scripts.js';

/**
 * How long a run that should ask for approval may go without any event (checks 4 and 5): a live
 * Hermes begins a run, model call included, within this even on a loaded machine (14 s seen for a
 * first run on two busy cores); the simulator at once.
 */
const LIVE_SILENT_RUN_MS = 30_000;
const SIMULATED_SILENT_RUN_MS = 2_000;

export const DEFAULT_HARMLESS_PROMPT = 'Reply with the single word: ready';

export function defaultApprovalPrompt(scratchCommand: string): string {
  return `Use the terminal tool to run exactly: ${scratchCommand} (an empty scratch folder in the working directory). Do not run anything else.`;
}

export async function qualifyCommand(args: string[]): Promise<number> {
  const { values } = parseCommand('qualify', args, (argv) =>
    parseArgs({
      args: argv,
      strict: true,
      options: {
        config: { type: 'string' },
        out: { type: 'string' },
        'approval-prompt': { type: 'string' },
        'harmless-prompt': { type: 'string' },
        simulate: { type: 'boolean' },
        profile: { type: 'string' },
        timeout: { type: 'string' },
        help: HELP_OPTION,
      },
    }),
  );
  if (values.help) {
    process.stdout.write(QUALIFY_HELP);
    return EXIT.ok;
  }
  const profile = simulatorChoice('qualify', values) ?? 'pin';
  for (const name of ['approval-prompt', 'harmless-prompt'] as const) {
    if (values[name] !== undefined && values[name].trim() === '') throw new UsageError(`qualify: --${name} must not be empty`);
  }
  const timeoutSeconds = integerOption(values.timeout, 'timeout', 1, 3600) ?? (values.simulate ? 10 : 120);
  let config = values.simulate ? undefined : loadConfig(values.config);
  if (values.out !== undefined) ensureFolder(values.out);

  const scratchCommand = `rm -rf ./aip-qualification-scratch-${randomBytes(6).toString('hex')}`;
  const approvalPrompt = values['approval-prompt'] ?? defaultApprovalPrompt(scratchCommand);
  const harmlessPrompt = values['harmless-prompt'] ?? DEFAULT_HARMLESS_PROMPT;
  const identities = artifactIdentities();

  let simulator: HermesSimulator | undefined;
  if (config === undefined) ({ simulator, config } = await startEmbeddedSimulator(profile));

  const interrupt = new AbortController();
  const stopListening = onInterrupt(() => interrupt.abort());
  const qualificationId = `qual_${randomBytes(12).toString('hex')}`;
  const settings: QualifySettings = {
    qualificationId,
    stepTimeoutMs: timeoutSeconds * 1000,
    pollMs: values.simulate ? 20 : 250,
    silentRunMs: values.simulate ? SIMULATED_SILENT_RUN_MS : LIVE_SILENT_RUN_MS,
    approvalPrompt,
    harmlessPrompt,
    signal: interrupt.signal,
    ...(simulator ? { scripts: simulatorScripts(scratchCommand), providerRequestCount: () => simulator.requests.length } : {}),
    // 0.18.2-0.20.1 forget every run in a restart; the later profile marks unsettled runs `interrupted`,
    // which check 8 accepts as an explained outcome.
    ...(simulator ? { restartProvider: () => simulator.restart() } : {}),
    ...(config.journal === undefined ? {} : { journal: true }),
  };
  const progress = createProgress(process.stdout);
  const startedAt = Date.now();
  let endpoints: EndpointRecord[];
  try {
    const { connector, ledger } = openConnector(config);
    try {
      const where = simulator
        ? `the embedded Hermes simulator (profile ${profile}) at ${simulator.url}`
        : `${config.endpoints.length} endpoint${config.endpoints.length === 1 ? '' : 's'} from ${config.source}`;
      process.stdout.write(`hermes-aip qualify ${qualificationId}: ${CHECKS.length} checks against ${where}\n`);
      endpoints = await qualifyEndpoints(config.endpoints, connector, ledger, settings, progress);
    } finally {
      progress.close();
      await connector.close();
    }
  } finally {
    stopListening();
    await simulator?.close();
  }
  const finishedAt = Date.now();

  const checks = endpoints.flatMap((endpoint) => endpoint.checks);
  const passed = checks.filter((check) => check.result === 'passed').length;
  const evidence: QualificationEvidence = {
    $schema: EVIDENCE_SCHEMA_ID,
    qualification_id: qualificationId,
    result: interrupt.signal.aborted ? 'interrupted' : passed === checks.length ? 'passed' : 'failed',
    started_at: new Date(startedAt).toISOString(),
    finished_at: new Date(finishedAt).toISOString(),
    duration_ms: finishedAt - startedAt,
    target: {
      kind: simulator ? 'simulator' : 'live',
      config_source: config.source,
      simulator_profile: simulator ? profile : null,
      note: simulator
        ? `Qualified against the embedded Hermes simulator (profile ${profile}), a clean-room model: this is evidence about the connector and this tool, not about any live Hermes deployment.`
        : `Qualified against live Hermes (${liveVersions(endpoints)}): the evidence holds for these endpoints, Hermes versions, credential revisions and connector revision at the recorded times.`,
    },
    identities,
    settings: {
      step_timeout_ms: settings.stepTimeoutMs,
      approval_choice: APPROVAL_CHOICE,
      approval_prompt: promptRecord(approvalPrompt, values['approval-prompt'] === undefined),
      harmless_prompt: promptRecord(harmlessPrompt, values['harmless-prompt'] === undefined),
      ledger: describeLedger(config.ledger),
    },
    endpoints,
    summary: { endpoints: endpoints.length, checks: checks.length, passed, failed: checks.length - passed },
  };

  const verdict = evidence.result.toUpperCase();
  process.stdout.write(
    `\nQualification ${verdict}: ${passed}/${checks.length} checks passed on ${endpoints.length} endpoint${endpoints.length === 1 ? '' : 's'} in ${duration(evidence.duration_ms)}\n`,
  );
  if (values.out !== undefined) {
    const [evidencePath, reportPath] = writeArtifacts(
      values.out,
      [
        ['evidence.json', jsonDocument(evidence)],
        ['report.html', renderReport(evidence)],
      ],
      'the evidence',
    );
    process.stdout.write(`Evidence: ${evidencePath}\nReport:   ${reportPath}\n`);
  }
  if (evidence.result === 'interrupted') return EXIT.interrupted;
  return evidence.result === 'passed' ? EXIT.ok : EXIT.failed;
}

/** "version 0.19.0", "versions 0.18.2, 0.19.0", or why a version is unknown. */
function liveVersions(endpoints: EndpointRecord[]): string {
  const versions = [...new Set(endpoints.map((endpoint) => endpoint.hermes.version ?? 'unknown (GET /health gave none)'))];
  return `${versions.length === 1 ? 'version' : 'versions'} ${versions.join(', ')}`;
}

function promptRecord(prompt: string, isDefault: boolean): PromptRecord {
  return { default: isDefault, sha256: sha256(prompt), length: prompt.length };
}

/** Fails before a long qualification, not after it, when the output folder cannot be made. */
function ensureFolder(dir: string): void {
  try {
    mkdirSync(resolve(dir), { recursive: true });
  } catch (error) {
    throw new UsageError(`qualify: cannot create the output folder given with --out: ${fileErrorText(error)}`);
  }
}
