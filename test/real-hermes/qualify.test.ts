/**
 * `hermes-aip qualify` (the built CLI, its default prompts) against the real Hermes of every
 * installed release: the eight checks pass, and the evidence names the endpoint and the Hermes
 * version it reports, never the key.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { assertMatches } from '../helpers/schema-check.js';
import { CHECK_IDS, runCli, tempDir } from '../cli/helpers.js';
import { describeEachReleaseWithEndpoint, endpointsFileFor } from './support.js';

const QUALIFY_TIMEOUT_MS = 240_000;

describeEachReleaseWithEndpoint('hermes-aip qualify against real Hermes %s', (running, version) => {
  test(
    'passes all eight checks with the default prompts',
    async () => {
      const endpoint = running();
      const folder = tempDir();
      const config = endpointsFileFor(endpoint, folder);
      const out = join(folder, 'out');

      const run = await runCli(['qualify', '--config', config, '--out', out, '--timeout', '60'], { timeoutMs: QUALIFY_TIMEOUT_MS });

      expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
      const evidence = JSON.parse(readFileSync(join(out, 'evidence.json'), 'utf8')) as {
        result: string;
        target: { kind: string };
        endpoints: Array<{ hermes: { version: string | null }; offer: { source: string }; checks: Array<{ id: string; result: string }> }>;
      };
      assertMatches('qualification/evidence.schema.json', evidence);
      expect(evidence.result).toBe('passed');
      // The evidence names the Hermes that answered: the installed release, as its /health says.
      expect(evidence.target.kind).toBe('live');
      expect(evidence.endpoints[0]?.hermes).toMatchObject({ version, platform: 'hermes-agent', problem: null });
      // And what it declares: every release serves GET /v1/capabilities.
      expect(evidence.endpoints[0]?.offer.source).toBe('capabilities');
      expect(readFileSync(join(out, 'report.html'), 'utf8')).toContain(`live Hermes ${version}`);
      expect(evidence.endpoints[0]?.checks.map((check) => [check.id, check.result])).toEqual(CHECK_IDS.map((id) => [id, 'passed']));
      expect(readFileSync(join(out, 'evidence.json'), 'utf8')).not.toContain(endpoint.hermes.apiKey);
    },
    QUALIFY_TIMEOUT_MS,
  );
});
