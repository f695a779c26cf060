import { parseArgs } from 'node:util';
import { HELP_OPTION, parseCommand } from './args.js';
import { openConnector, loadConfig } from './config.js';
import { EXIT } from './errors.js';
import { MANIFEST_HELP } from './help.js';

export async function manifestCommand(args: string[]): Promise<number> {
  const { values } = parseCommand('manifest', args, (argv) =>
    parseArgs({ args: argv, strict: true, options: { config: { type: 'string' }, help: HELP_OPTION } }),
  );
  if (values.help) {
    process.stdout.write(MANIFEST_HELP);
    return EXIT.ok;
  }
  const { connector } = openConnector(loadConfig(values.config));
  try {
    process.stdout.write(`${JSON.stringify(connector.manifest(), null, 2)}\n`);
  } finally {
    await connector.close();
  }
  return EXIT.ok;
}
