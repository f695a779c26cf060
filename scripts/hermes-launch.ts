/**
 * npm run hermes:launch -- [--version 0.19.0] [--max-concurrent-runs N]: runs one real Hermes
 * (installed by npm run hermes:install) with the fake model on 127.0.0.1 until Ctrl-C, and writes an
 * endpoints file for `hermes-aip qualify|invoke --config`. The key is written to a private file beside
 * it, never printed; both are removed on exit, with Hermes' temporary HOME and HERMES_HOME.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startFakeModel } from '../src/fake-model/index.js';
import { waitForTermination } from '../src/cli/signals.js';
import { installedHermesVersions, startRealHermes } from '../test/helpers/real-hermes.js';

const { values } = parseArgs({ options: { version: { type: 'string' }, 'max-concurrent-runs': { type: 'string' } }, strict: true });
const installed = installedHermesVersions();
const version = values.version ?? installed.at(-1);
if (version === undefined || !installed.includes(version)) {
  console.error(`hermes:launch: Hermes ${version ?? ''} is not installed (installed: ${installed.join(', ') || 'none'}); run npm run hermes:install`);
  process.exit(2);
}
const maxConcurrentRuns = values['max-concurrent-runs'] === undefined ? undefined : Number(values['max-concurrent-runs']);

const model = await startFakeModel();
const hermes = await startRealHermes({ version, fakeModelUrl: model.baseUrl, ...(maxConcurrentRuns === undefined ? {} : { maxConcurrentRuns }) }).catch(async (error: unknown) => {
  await model.close();
  throw error;
});
const folder = mkdtempSync(join(tmpdir(), 'hermes-launch-'));
try {
  writeFileSync(join(folder, 'api-key'), `${hermes.apiKey}\n`, { mode: 0o600 });
  const endpoints = join(folder, 'endpoints.json');
  writeFileSync(endpoints, `${JSON.stringify({ endpoints: [{ id: 'real', baseUrl: hermes.baseUrl, apiKeyFile: 'api-key' }] }, null, 2)}\n`, { mode: 0o600 });
  console.log(
    [
      `Hermes ${version} listening on ${hermes.baseUrl} (fake model at ${model.baseUrl})`,
      `Working directory of its tools: ${hermes.scratchDir}`,
      `Endpoints file: ${endpoints} (key in a private file beside it, not printed)`,
      `Try: node dist/cli/main.js qualify --config ${endpoints}`,
      'Stop with Ctrl-C.',
    ].join('\n'),
  );
  await waitForTermination();
} finally {
  await hermes.stop();
  await model.close();
  rmSync(folder, { recursive: true, force: true });
}
console.log('Hermes stopped.');
