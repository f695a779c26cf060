import { parseArgs } from 'node:util';
import { startFakeModel, type FakeModel } from '../fake-model/index.js';
import { HELP_OPTION, integerOption, parseCommand } from './args.js';
import { CliError, EXIT } from './errors.js';
import { FAKE_MODEL_HELP } from './help.js';
import { waitForTermination } from './signals.js';

export async function fakeModelCommand(args: string[]): Promise<number> {
  const { values } = parseCommand('fake-model', args, (argv) =>
    parseArgs({ args: argv, strict: true, options: { port: { type: 'string' }, help: HELP_OPTION } }),
  );
  if (values.help) {
    process.stdout.write(FAKE_MODEL_HELP);
    return EXIT.ok;
  }
  const port = integerOption(values.port, 'port', 0, 65535) ?? 0;
  let model: FakeModel;
  try {
    model = await startFakeModel({ port });
  } catch (error) {
    throw new CliError(`fake-model: cannot listen on 127.0.0.1:${port}: ${error instanceof Error ? error.message : String(error)}`);
  }
  process.stdout.write(`Fake OpenAI-compatible model listening; base URL ${model.baseUrl}\nStop with Ctrl-C.\n`);
  try {
    await waitForTermination();
  } finally {
    await model.close();
  }
  process.stdout.write('Fake model stopped.\n');
  return EXIT.ok;
}
