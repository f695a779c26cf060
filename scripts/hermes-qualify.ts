/**
 * npm run hermes:qualify -- [--version 0.19.0] [--out DIR]: launches one real Hermes (installed by
 * npm run hermes:install) with the fake model on 127.0.0.1, runs the built `hermes-aip qualify`
 * against it with its default prompts, writes DIR/evidence.json and DIR/report.html (default
 * qualification-real), stops Hermes and exits with qualify's exit code.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { chosenHermesVersion, launchHermesForCli } from '../test/helpers/real-hermes.js';

const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));

const { values } = parseArgs({ options: { version: { type: 'string' }, out: { type: 'string', default: 'qualification-real' } }, strict: true });
const version = chosenHermesVersion('hermes:qualify', values.version);

const launched = await launchHermesForCli({ version });
let code: number;
try {
  console.log(`Hermes ${version} listening on ${launched.hermes.baseUrl} (fake model at ${launched.model.baseUrl})`);
  const child = spawn(process.execPath, [CLI, 'qualify', '--config', launched.endpointsFile, '--out', values.out], { stdio: 'inherit' });
  code = await new Promise<number>((resolve) => child.once('exit', (exitCode) => resolve(exitCode ?? 1)));
} finally {
  await launched.close();
}
process.exit(code);
