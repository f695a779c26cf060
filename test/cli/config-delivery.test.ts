/** The config file's "delivery" field: passed to the connector's `delivery` option as written, and refused there when it is invalid. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig, openConnector } from '../../src/cli/config.js';

function configFile(fields: Record<string, unknown>): string {
  const folder = mkdtempSync(join(tmpdir(), 'aip-cli-delivery-'));
  const path = join(folder, 'config.json');
  writeFileSync(path, JSON.stringify({ endpoints: [{ id: 'local', baseUrl: 'http://127.0.0.1:9', apiKeyEnv: 'CLI_DELIVERY_KEY' }], ...fields }));
  return path;
}
const env = { CLI_DELIVERY_KEY: 'hk_cli_delivery_key_0123456789' };

describe('config file "delivery"', () => {
  it('reaches the connector as its delivery option', async () => {
    const config = loadConfig(configFile({ ledger: { sqlite: 'ledger.db' }, journal: {}, delivery: { maxAgeMs: 60_000, concurrencyPerTarget: 4 } }), env);
    expect(config.delivery).toEqual({ maxAgeMs: 60_000, concurrencyPerTarget: 4 });
    const { connector } = openConnector(config);
    await connector.close();
  });

  it('is refused by the connector, naming the field, when out of bounds', () => {
    const config = loadConfig(configFile({ ledger: { sqlite: 'ledger.db' }, journal: {}, delivery: { maxAgeMs: 1 } }), env);
    expect(() => openConnector(config)).toThrow(/delivery\.maxAgeMs must be an integer from 1000/);
  });
});
