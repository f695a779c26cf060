/**
 * The config file's "webhooks" field reaches the connector (for every command, the MCP server and the
 * host, which all open it through loadConfig and openConnector): secretFile relative to the file's
 * folder, and a refusal is a usage error that names the problem, never the secret.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig, openConnector } from '../../src/cli/config.js';
import { UsageError } from '../../src/cli/errors.js';
import { caught } from '../helpers/fixtures.js';
import { expectOneErrorLine, runCli, tempDir } from './helpers.js';

/** A config file with a SQLite ledger, the journal and one webhook whose secret file has `mode`. */
function configWithWebhook(mode: number): { path: string; folder: string; secret: string } {
  const folder = tempDir();
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  writeFileSync(join(folder, 'hook.secret'), secret);
  chmodSync(join(folder, 'hook.secret'), mode);
  writeFileSync(join(folder, 'key'), 'hk_config_webhooks');
  const config = {
    endpoints: [{ id: 'prod', baseUrl: 'http://127.0.0.1:9', apiKeyFile: 'key' }],
    ledger: { sqlite: 'ledger.db' },
    journal: {},
    webhooks: [{ url: 'https://hooks.example.com/hermes', secretFile: 'hook.secret', events: 'lifecycle' }],
  };
  const path = join(folder, 'hermes.json');
  writeFileSync(path, JSON.stringify(config));
  return { path, folder, secret };
}

describe('config file "webhooks"', { timeout: 60_000 }, () => {
  it('resolves secretFile against the config folder and opens the connector with the webhook', async () => {
    const { path, folder } = configWithWebhook(0o600);
    const config = loadConfig(path);
    expect(config.webhooks).toEqual([{ url: 'https://hooks.example.com/hermes', secretFile: join(folder, 'hook.secret'), events: 'lifecycle' }]);
    const { connector } = openConnector(config);
    await connector.close();
  });

  it('a secret file others may read is a usage error naming the field, never the secret', () => {
    const { path, secret } = configWithWebhook(0o644);
    const error = caught(() => openConnector(loadConfig(path)));
    expect(error).toBeInstanceOf(UsageError);
    expect((error as Error).message).toBe(`invalid configuration (file ${path}): webhooks[0] secretFile: the file must be owner-only (chmod 600)`);
    expect((error as Error).message).not.toContain(secret.slice(6));
  });

  it('the CLI refuses it in one line with exit code 2', async () => {
    const { path, secret } = configWithWebhook(0o640);
    const run = await runCli(['manifest', '--config', path]);
    expect(run.code).toBe(2);
    expectOneErrorLine(run.stderr, /webhooks\[0\] secretFile: the file must be owner-only \(chmod 600\)/);
    expect(run.stderr + run.stdout).not.toContain(secret.slice(6));
  });
});
