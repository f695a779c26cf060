/**
 * `hermes-aip qualify` (the built CLI, its default prompts) against the real Hermes of every
 * installed release: the eight checks pass, and the evidence names the endpoint and the Hermes
 * version it reports, never the key.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { assertMatches } from '../helpers/schema-check.js';
import { CHECK_IDS, runCli, tempDir } from '../cli/helpers.js';
import { describeEachRelease, START_TIMEOUT_MS, startRealEndpoint, type RealEndpoint } from './support.js';

const QUALIFY_TIMEOUT_MS = 240_000;

describeEachRelease('hermes-aip qualify against real Hermes %s', {}, (version) => {
  let endpoint: RealEndpoint;
  beforeAll(async () => {
    endpoint = await startRealEndpoint({ version });
  }, START_TIMEOUT_MS);
  afterAll(async () => {
    await endpoint?.close();
  }, START_TIMEOUT_MS);

  test(
    'passes all eight checks with the default prompts',
    async () => {
      const folder = tempDir();
      writeFileSync(join(folder, 'api-key'), `${endpoint.hermes.apiKey}\n`, { mode: 0o600 });
      const config = join(folder, 'endpoints.json');
      writeFileSync(config, JSON.stringify({ endpoints: [{ id: 'real', baseUrl: endpoint.hermes.baseUrl, apiKeyFile: 'api-key' }] }));
      const out = join(folder, 'out');

      const run = await runCli(['qualify', '--config', config, '--out', out, '--timeout', '60'], { timeoutMs: QUALIFY_TIMEOUT_MS });

      expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
      const evidence = JSON.parse(readFileSync(join(out, 'evidence.json'), 'utf8')) as {
        result: string;
        target: { kind: string };
        endpoints: Array<{ hermes: { version: string | null }; checks: Array<{ id: string; result: string }> }>;
      };
      assertMatches('qualification/evidence.schema.json', evidence);
      expect(evidence.result).toBe('passed');
      // The evidence names the Hermes that answered: the installed release, as its /health says.
      expect(evidence.target.kind).toBe('live');
      expect(evidence.endpoints[0]?.hermes).toMatchObject({ version, platform: 'hermes-agent', problem: null });
      expect(readFileSync(join(out, 'report.html'), 'utf8')).toContain(`live Hermes ${version}`);
      expect(evidence.endpoints[0]?.checks.map((check) => [check.id, check.result])).toEqual(CHECK_IDS.map((id) => [id, 'passed']));
      expect(readFileSync(join(out, 'evidence.json'), 'utf8')).not.toContain(endpoint.hermes.apiKey);
    },
    QUALIFY_TIMEOUT_MS,
  );
});
