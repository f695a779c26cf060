#!/usr/bin/env node
/**
 * `hermes-aip`: the connector's command line. `manifest` and `invoke` drive the connector,
 * `qualify` runs the seed's eight integration checks and keeps the evidence, `conformance` runs
 * the AIP conformance kit's thirteen behaviour checks, `simulate` runs the Hermes simulator,
 * `fake-model` an OpenAI-compatible fake model for running the real Hermes, `mcp` serves the
 * capabilities as MCP tools, `host` serves them to an AIP runtime as a remote connector host
 * (aip.native.http.v1), `admission` builds the signed package an AIP deployment admits the host's image with.
 * Every error is one line on stderr and a non-zero exit code.
 */
import { PACKAGE_NAME, PACKAGE_VERSION } from '../internal/package-info.js';
import { describeError, EXIT, UsageError } from './errors.js';
import { TOP_HELP } from './help.js';
import { isNameLike } from './args.js';
import { startTracingFromEnv } from './telemetry.js';

type Command = (args: string[]) => Promise<number>;

/** Loaded on demand, so that `--help` and usage errors do not load the connector first. */
const COMMANDS: Record<string, () => Promise<Command>> = {
  manifest: async () => (await import('./manifest.js')).manifestCommand,
  invoke: async () => (await import('./invoke.js')).invokeCommand,
  qualify: async () => (await import('./qualify/command.js')).qualifyCommand,
  conformance: async () => (await import('../conformance/command.js')).conformanceCommand,
  simulate: async () => (await import('./simulate.js')).simulateCommand,
  'fake-model': async () => (await import('./fake-model.js')).fakeModelCommand,
  mcp: async () => (await import('../mcp/command.js')).mcpCommand,
  host: async () => (await import('../host/command.js')).hostCommand,
  admission: async () => (await import('./admission/command.js')).admissionCommand,
};

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(TOP_HELP);
    return EXIT.ok;
  }
  if (command === '--version' || command === '-v') {
    process.stdout.write(`${PACKAGE_NAME} ${PACKAGE_VERSION}\n`);
    return EXIT.ok;
  }
  if (command === undefined) {
    process.stderr.write(TOP_HELP);
    return EXIT.usage;
  }
  const load = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
  if (!load) {
    const named = isNameLike(command) ? ` "${command}"` : '';
    throw new UsageError(`unknown command${named} (commands: ${Object.keys(COMMANDS).join(', ')}; see hermes-aip --help)`);
  }
  const run = await load();
  const flushTraces = await startTracingFromEnv(process.env);
  try {
    return await run(rest);
  } finally {
    await flushTraces?.();
  }
}

// A reader that goes away (`hermes-aip … | head -1`, a closed terminal) fails the next write with
// EPIPE. The output is no longer wanted, but the command's work still is: it finishes (a stream's
// call ends, an outcome still reaches the ledger) instead of dying of an unhandled 'error' event.
// Writes that wait for their callback (stream chunks) see the error; `mcp` ends its session.
for (const output of [process.stdout, process.stderr]) output.on('error', () => undefined);

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    const { line, exitCode } = describeError(error);
    process.stderr.write(`${line}\n`);
    process.exitCode = exitCode;
  },
);
