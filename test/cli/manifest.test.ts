import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { assertMatches } from '../helpers/schema-check.js';
import { runCli, tempDir } from './helpers.js';

const KEY = 'hk_manifest_key_90ab12';
const OPERATIONS = ['run_start', 'run_status', 'run_events', 'run_approval', 'run_stop'];

describe('hermes-aip manifest', { timeout: 60_000 }, () => {
  it('prints the manifest for HERMES_BASE_URL/HERMES_API_KEY as endpoint "default"', async () => {
    const run = await runCli(['manifest'], { env: { HERMES_BASE_URL: 'http://127.0.0.1:8642', HERMES_API_KEY: KEY } });
    expect(run.code).toBe(0);
    const manifest = JSON.parse(run.stdout) as { capabilities: Array<{ id: string }> };
    assertMatches('aip/manifest.schema.json', manifest);
    expect(manifest.capabilities.map((capability) => capability.id)).toEqual(OPERATIONS.map((operation) => `cap:hermes_agent:default:${operation}`));
    expect(run.stdout).not.toContain(KEY);
  });

  it('prints five capabilities per endpoint of a config file', async () => {
    const folder = tempDir();
    writeFileSync(join(folder, 'a.key'), KEY);
    const path = join(folder, 'endpoints.json');
    writeFileSync(
      path,
      JSON.stringify({
        endpoints: [
          { id: 'east', baseUrl: 'https://hermes-east.internal', apiKeyFile: 'a.key', tenantId: 'tenant-a', displayName: 'East' },
          { id: 'west', baseUrl: 'https://hermes-west.internal', apiKeyEnv: 'WEST_KEY' },
        ],
      }),
    );
    const run = await runCli(['manifest', '--config', path], { env: { WEST_KEY: `${KEY}-west` } });
    expect(run.code).toBe(0);
    const manifest = JSON.parse(run.stdout) as { capabilities: Array<{ id: string; name: string }>; compatibility: { tenant_bound_endpoints: string[] } };
    expect(manifest.capabilities).toHaveLength(10);
    expect(manifest.capabilities[0]?.name).toContain('East');
    expect(manifest.compatibility.tenant_bound_endpoints).toEqual(['east']);
    expect(run.stdout).not.toContain(KEY);
  });
});
