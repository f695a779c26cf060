import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { isSimulatorProfile, SIMULATOR_PROFILES, startHermesSimulator, type HermesSimulator } from '../simulator/index.js';
import { HELP_OPTION, integerOption, parseCommand } from './args.js';
import { CliError, EXIT, UsageError } from './errors.js';
import { SIMULATE_HELP } from './help.js';
import { waitForTermination } from './signals.js';

const DEFAULT_PORT = 8642;

export async function simulateCommand(args: string[]): Promise<number> {
  const { values } = parseCommand('simulate', args, (argv) =>
    parseArgs({ args: argv, strict: true, options: { port: { type: 'string' }, profile: { type: 'string' }, help: HELP_OPTION } }),
  );
  if (values.help) {
    process.stdout.write(SIMULATE_HELP);
    return EXIT.ok;
  }
  const port = integerOption(values.port, 'port', 0, 65535) ?? DEFAULT_PORT;
  const profile = values.profile ?? 'pin';
  if (!isSimulatorProfile(profile)) throw new UsageError(`simulate: --profile must be one of ${SIMULATOR_PROFILES.join(', ')}`);
  const fromEnv = process.env['HERMES_API_KEY'];
  const apiKey = fromEnv !== undefined && fromEnv.trim() !== '' ? fromEnv.trim() : `hk_sim_${randomBytes(24).toString('hex')}`;

  let simulator: HermesSimulator;
  try {
    simulator = await startHermesSimulator({ apiKey, port, profile });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'EADDRINUSE' ? 'the port is in use' : code === 'EACCES' ? 'permission denied' : error instanceof Error ? error.message : String(error);
    throw new CliError(`simulate: cannot listen on 127.0.0.1:${port}: ${why}`);
  }
  const folder = mkdtempSync(join(tmpdir(), 'hermes-aip-simulator-'));
  try {
    const endpoint: Record<string, string> = { id: 'simulator', baseUrl: simulator.url };
    if (fromEnv === undefined || fromEnv.trim() === '') {
      writeFileSync(join(folder, 'api-key'), `${apiKey}\n`, { mode: 0o600 });
      endpoint['apiKeyFile'] = 'api-key';
    } else {
      endpoint['apiKeyEnv'] = 'HERMES_API_KEY';
    }
    const endpointsPath = join(folder, 'endpoints.json');
    writeFileSync(endpointsPath, `${JSON.stringify({ endpoints: [endpoint] }, null, 2)}\n`, { mode: 0o600 });
    process.stdout.write(
      [
        `Hermes simulator (profile ${profile}) listening on ${simulator.url}`,
        `API key: ${endpoint['apiKeyFile'] ? `generated, in ${join(folder, 'api-key')} (not printed)` : 'from HERMES_API_KEY'}`,
        `Endpoints file: ${endpointsPath}`,
        `Try: hermes-aip qualify --config ${endpointsPath}`,
        'Stop with Ctrl-C.',
        '',
      ].join('\n'),
    );
    await waitForTermination();
  } finally {
    await simulator.close();
    rmSync(folder, { recursive: true, force: true });
  }
  process.stdout.write('Simulator stopped.\n');
  return EXIT.ok;
}
