/**
 * npm run hermes:launch -- [--version 0.19.0] [--max-concurrent-runs N]: runs one real Hermes
 * (installed by npm run hermes:install) with the fake model on 127.0.0.1 until Ctrl-C, and writes an
 * endpoints file for `hermes-aip qualify|invoke --config`. The key is written to a private file beside
 * it, never printed; both are removed on exit, with Hermes' temporary HOME and HERMES_HOME.
 */
import { parseArgs } from 'node:util';
import { waitForTermination } from '../src/cli/signals.js';
import { chosenHermesVersion, launchHermesForCli } from '../test/helpers/real-hermes.js';

const { values } = parseArgs({ options: { version: { type: 'string' }, 'max-concurrent-runs': { type: 'string' } }, strict: true });
const version = chosenHermesVersion('hermes:launch', values.version);
const maxConcurrentRuns = values['max-concurrent-runs'] === undefined ? undefined : Number(values['max-concurrent-runs']);

const launched = await launchHermesForCli({ version, ...(maxConcurrentRuns === undefined ? {} : { maxConcurrentRuns }) });
try {
  console.log(
    [
      `Hermes ${version} listening on ${launched.hermes.baseUrl} (fake model at ${launched.model.baseUrl})`,
      `Working directory of its tools: ${launched.hermes.scratchDir}`,
      `Endpoints file: ${launched.endpointsFile} (key in a private file beside it, not printed)`,
      `Try: node dist/cli/main.js qualify --config ${launched.endpointsFile} --out qualification-real`,
      'Stop with Ctrl-C.',
    ].join('\n'),
  );
  await waitForTermination();
} finally {
  await launched.close();
}
console.log('Hermes stopped.');
