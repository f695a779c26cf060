/**
 * `hermes-aip conformance` (the built CLI) against the real Hermes of every installed release:
 * the kit's eleven applicable checks pass, the two the manifest does not trigger are not
 * applicable, the artifact validates and holds no key.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { assertMatches } from '../helpers/schema-check.js';
import { runCli, tempDir } from '../cli/helpers.js';
import { describeEachReleaseWithEndpoint, endpointsFileFor } from './support.js';

const CONFORMANCE_TIMEOUT_MS = 300_000;

describeEachReleaseWithEndpoint('hermes-aip conformance against real Hermes %s', (running) => {
  test(
    'every applicable check passes; transaction_lifecycle and webhook_security are not applicable',
    async () => {
      const endpoint = running();
      const folder = tempDir();
      const config = endpointsFileFor(endpoint, folder);
      const out = join(folder, 'out');

      const run = await runCli(['conformance', '--config', config, '--out', out, '--timeout', '60'], { timeoutMs: CONFORMANCE_TIMEOUT_MS });

      expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
      const written = readFileSync(join(out, 'conformance.json'), 'utf8');
      const artifact = JSON.parse(written) as { result: string; endpoints: Array<{ checks: Array<{ id: string; verdict: string }> }> };
      assertMatches('conformance/conformance.schema.json', artifact);
      expect(artifact.result).toBe('passed');
      const verdicts = Object.fromEntries((artifact.endpoints[0]?.checks ?? []).map((check) => [check.id, check.verdict]));
      expect(Object.values(verdicts).filter((verdict) => verdict === 'passed')).toHaveLength(11);
      expect(verdicts['connector.behavior.transaction_lifecycle']).toBe('not_applicable');
      expect(verdicts['connector.behavior.webhook_security']).toBe('not_applicable');
      expect(written + readFileSync(join(out, 'conformance.html'), 'utf8')).not.toContain(endpoint.hermes.apiKey);
    },
    CONFORMANCE_TIMEOUT_MS,
  );
});
