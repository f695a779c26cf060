/**
 * The qualification with the run journal on (config file "journal", a SQLite ledger): the checks
 * read run events from the journal the connector fills, Hermes' stream of each run is read once
 * (by the follower), and check 7's cut consumer resumes instead of being answered 404.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readEvidence, runCli, simulatorWithConfig } from './helpers.js';

describe('hermes-aip qualify --config with the run journal on', { timeout: 120_000 }, () => {
  it('passes every check, check 3 and check 7 reading the journal', async () => {
    const { sim, configPath, folder } = await simulatorWithConfig();
    const config = JSON.parse(readFileSync(configPath, 'utf8')) as Record<string, unknown>;
    writeFileSync(configPath, JSON.stringify({ ...config, ledger: { sqlite: 'ledger.db' }, journal: { leaseMs: 1000 } }));
    const out = join(folder, 'evidence');
    const run = await runCli(['qualify', '--config', configPath, '--out', out, '--timeout', '20']);
    const evidence = readEvidence(out);
    const checks = evidence.endpoints[0]?.checks ?? [];
    expect(checks.filter((check) => check.result !== 'passed').map((check) => `${check.id}: ${check.reason}`)).toEqual([]);
    expect(run.code, run.stdout).toBe(0);
    const disconnect = checks.find((check) => check.id === 'disconnect_reconciled')?.evidence as Record<string, Record<string, unknown>>;
    const runId = disconnect['run_id'] as unknown as string;
    expect(disconnect['resumed']).toMatchObject({ after_sequence: 1 });
    expect(disconnect['read_from_first']?.['event_names']).toEqual(disconnect['cut_stream']?.['event_names']);
    expect(sim.requests.filter((request) => request.path === `/v1/runs/${runId}/events`)).toHaveLength(1);
    const ordered = checks.find((check) => check.id === 'ordered_events');
    expect(ordered?.result).toBe('passed');
  });
});
