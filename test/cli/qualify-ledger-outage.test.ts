/**
 * A qualification whose run ledger fails its reads: the checks that need the ledger fail, and
 * the evidence (which is written to evidence.json and report.html, and shared) names the error's
 * class and code, never the driver's message (its connection string, its SQL).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startHermesSimulator } from 'aip-connector-hermes-agent/simulator';
import { createHermesConnector, createMemoryLedger, type RunLedger } from '../../src/index.js';
import type { Progress } from '../../src/cli/progress.js';
import { qualifyEndpoints } from '../../src/cli/qualify/runner.js';
import { ledgerOverriding, simulatorQualifySettings } from './qualify-helpers.js';

const KEY = 'hk_qualify_outage_test_5e6f7a8b';
const DRIVER_MESSAGE =
  'connection to postgres://aip_ci:s3cret-ledger-pass@db.internal:5432/aip_ledger lost during SELECT * FROM aip_run_bindings WHERE run_id = $1';
const open: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  for (const item of open.splice(0).reverse()) await item.close();
});

/** The ledger, except that every evidence read fails as a database driver would. */
function ledgerWithFailingReads(inner: RunLedger): RunLedger {
  return ledgerOverriding(inner, { evidence: () => Promise.reject(Object.assign(new Error(DRIVER_MESSAGE), { code: '57P01' })) });
}

const quiet: Progress = { endpointStarted() {}, checkStarted() {}, checkFinished() {}, endpointFinished() {}, close() {} };

describe('qualify during a ledger outage', { timeout: 60_000 }, () => {
  it('fails the checks that read the ledger, naming the error class and code, never the driver message', async () => {
    const sim = await startHermesSimulator({ apiKey: KEY, keepaliveMs: 200 });
    open.push(sim);
    const inner = createMemoryLedger();
    open.push(inner);
    const ledger = ledgerWithFailingReads(inner);
    const endpoint = { id: 'local', baseUrl: sim.url, apiKey: KEY };
    const connector = createHermesConnector({ endpoints: [endpoint], ledger });
    open.push(connector);
    const [record] = await qualifyEndpoints([{ config: endpoint, keySource: 'test' }], connector, ledger, simulatorQualifySettings(), quiet);
    const reasons = (record?.checks ?? []).flatMap((check) => (check.reason === null ? [] : [check.reason]));
    expect(reasons, JSON.stringify(reasons)).toContain('unexpected error: Error (57P01)');
    const written = JSON.stringify(record);
    for (const part of ['s3cret', 'postgres://', 'SELECT', 'aip_run_bindings']) expect(written).not.toContain(part);
  });
});
