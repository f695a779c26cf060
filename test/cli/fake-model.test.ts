import { describe, expect, it } from 'vitest';
import { expectOneErrorLine, finished, runCli, spawnCli, waitForOutput } from './helpers.js';

describe('hermes-aip fake-model', { timeout: 60_000 }, () => {
  it('serves the fake model on 127.0.0.1 until SIGTERM, then exits 0', async () => {
    const child = spawnCli(['fake-model', '--port', '0']);
    const printed = await waitForOutput(child.stdout, /base URL (http:\/\/127\.0\.0\.1:\d+\/v1)\n/);
    const baseUrl = /base URL (\S+)/.exec(printed)?.[1];
    const models = await fetch(`${baseUrl}/models`);
    expect(await models.json()).toMatchObject({ data: [{ id: 'fake-model' }] });
    child.kill('SIGTERM');
    const run = await finished(child, ['fake-model']);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('Fake model stopped.');
  });

  it('refuses a port out of range with a usage error', async () => {
    const run = await runCli(['fake-model', '--port', '70000']);
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, '--port must be an integer from 0 to 65535');
  });
});
