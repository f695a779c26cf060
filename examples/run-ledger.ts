/**
 * docs/run-ledger.md's code: a durable ledger answers a repeated start from its record.
 * Run: npm run build && npx tsx examples/run-ledger.ts
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHermesConnector, createSqliteLedger } from 'aip-connector-hermes-agent';
import { startHermesSimulator } from 'aip-connector-hermes-agent/simulator';

const hermes = await startHermesSimulator({ apiKey: 'hk_local_key' });
const endpoints = [{ id: 'local', baseUrl: hermes.url, apiKey: 'hk_local_key' }];
const dir = mkdtempSync(join(tmpdir(), 'run-ledger-'));
const ledgerPath = join(dir, 'ledger.db');

const ledger = createSqliteLedger({ path: ledgerPath }); // or createPostgresLedger({ connectionString })
const connector = createHermesConnector({ endpoints, ledger });
const start = { id: 'act_1', capability_id: 'cap:hermes_agent:local:run_start', input: { body: { input: 'Hello' } }, idempotency_key: 'order-7' };
const first = await connector.invoke(start, { tenantId: 'tenant-a' });
const again = await connector.invoke({ ...start, id: 'act_2' }, { tenantId: 'tenant-a' }); // answered from the ledger
console.log(first.status, again.status, again.receipt?.replayed, (await connector.evidence('act_1', { tenantId: 'tenant-a' }))?.run_id);
await connector.reconcile(); // after a restart: re-read every run that is not terminal

console.log(`runs started in Hermes: ${hermes.runs().length}`);
await connector.close();
await ledger.close();
await hermes.close();
rmSync(dir, { recursive: true, force: true });
