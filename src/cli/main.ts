#!/usr/bin/env node
/**
 * `hermes-aip`: the connector's command line. `manifest` and `invoke` drive the connector,
 * `qualify` runs the seed's eight integration checks and keeps the evidence, `simulate` runs
 * the Hermes simulator, `mcp` serves the capabilities as MCP tools. Every error is one line on stderr and a non-zero exit code.
 */
import { PACKAGE_NAME, PACKAGE_VERSION } from '../package-info.js';
import { describeError, EXIT, UsageError } from './errors.js';
import { TOP_HELP } from './help.js';

type Command = (args: string[]) => Promise<number>;

/** Loaded on demand, so that `--help` and usage errors do not load the connector first. */
const COMMANDS: Record<string, () => Promise<Command>> = {
  manifest: async () => (await import('./manifest.js')).manifestCommand,
  invoke: async () => (await import('./invoke.js')).invokeCommand,
  qualify: async () => (await import('./qualify/command.js')).qualifyCommand,
  simulate: async () => (await import('./simulate.js')).simulateCommand,
  mcp: async () => (await import('../mcp/command.js')).mcpCommand,
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
  if (!load) throw new UsageError(`unknown command "${command.slice(0, 40)}" (commands: ${Object.keys(COMMANDS).join(', ')}; see hermes-aip --help)`);
  return (await load())(rest);
}

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
