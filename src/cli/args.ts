import { readFileSync } from 'node:fs';
import { isSimulatorProfile, SIMULATOR_PROFILES } from '../simulator/hermes/profiles.js';
import type { SimulatorProfile } from '../simulator/hermes/types.js';
import { UsageError } from './errors.js';
import { parseJsonText } from '../internal/json-text.js';
import { fileErrorText } from '../internal/owned-file.js';

/** Every command takes `--help` / `-h`. */
export const HELP_OPTION = { type: 'boolean', short: 'h' } as const;

/** Options that look like a credential: refused with a pointer to where keys do come from. */
const KEY_OPTION = /^--?(api[-_]?key|key|token|secret|password|bearer)(=|$)/i;

/** Where the Hermes API key comes from, for every command. */
export const API_KEY_SOURCES = 'API keys come from apiKeyFile or apiKeyEnv in --config, or the HERMES_API_KEY environment variable';

/**
 * Runs `parse` (node:util parseArgs in strict mode) over `args`; its errors become usage errors
 * (exit 2). An option that looks like a secret is refused without echoing its value, with a
 * pointer to where this command's secrets do come from (`secretSources`).
 */
export function parseCommand<T>(command: string, args: string[], parse: (args: string[]) => T, secretSources = API_KEY_SOURCES): T {
  for (const arg of args) {
    if (arg === '--') break;
    if (KEY_OPTION.test(arg)) throw new UsageError(`${command}: secrets are never taken from the command line; ${secretSources}`);
  }
  try {
    return parse(args);
  } catch (error) {
    throw new UsageError(`${command}: ${parseErrorText(error)} (see hermes-aip ${command} --help)`);
  }
}

/** parseArgs' complaint without the argument it quotes, unless that is a word-shaped option name. */
function parseErrorText(error: unknown): string {
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const option = /'([^']*)'/.exec(String(message))?.[1] ?? '';
    return isNameLike(option) ? `Unknown option '${option}'` : 'an unknown option';
  }
  if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') return 'unexpected argument (this command takes no positional arguments)';
  // It quotes only option names this command defines.
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') return String(message);
  return 'invalid arguments';
}

/**
 * Whether an error may quote a token a user typed: a short word of lowercase letters and dashes,
 * like a mistyped command or option. Anything else may be a key pasted in the wrong place.
 */
export function isNameLike(token: string): boolean {
  return /^-{0,2}[a-z][a-z-]{0,23}$/.test(token);
}

/**
 * A JSON argument given inline or as `@file`. `what` names it in errors; the value itself, and
 * the file name, are never echoed (a grant, confidential input, or a key pasted by mistake).
 */
export function readJsonArgument(value: string, what: string): unknown {
  let text = value;
  if (value.startsWith('@')) {
    const path = value.slice(1);
    if (path === '') throw new UsageError(`${what}: @ must be followed by a file name`);
    try {
      text = readFileSync(path, 'utf8');
    } catch (error) {
      throw new UsageError(`${what}: cannot read the file named after @: ${fileErrorText(error)}`);
    }
  }
  return parseJsonText(text, (why) => new UsageError(`${what} is not valid JSON${value.startsWith('@') ? ' (the file named after @)' : ''}: ${why}`));
}

/** A positive integer option (`--port 0` allowed with `min: 0`). */
export function integerOption(value: string | undefined, name: string, min: number, max: number): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new UsageError(`--${name} must be an integer from ${min} to ${max}`);
  }
  return Number(value);
}

// Re-exported for the commands, which read their files with it.
export { fileErrorText };

/**
 * What `--simulate`, `--profile` and `--config` ask for, checked the same way by every command that
 * takes them: the simulator's profile (default pin), or undefined for configured endpoints.
 */
export function simulatorChoice(command: string, values: { simulate?: boolean; profile?: string; config?: string }): SimulatorProfile | undefined {
  if (values.simulate && values.config !== undefined) throw new UsageError(`${command}: --simulate and --config exclude each other`);
  if (values.profile !== undefined && !values.simulate) throw new UsageError(`${command}: --profile applies only with --simulate`);
  if (values.profile !== undefined && !isSimulatorProfile(values.profile)) {
    throw new UsageError(`${command}: --profile must be one of ${SIMULATOR_PROFILES.join(', ')}`);
  }
  if (!values.simulate) return undefined;
  return (values.profile as SimulatorProfile | undefined) ?? 'pin';
}
