/**
 * `hermes-aip invoke` of run_start with the run journal on: the command ends while its follower reads
 * the run, and closing its connector must leave the journal to the next process (still `following`, its
 * lease left to lapse), never close it `abandoned` as if the cut read were the run's end.
 */
import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, simulatorWithConfig } from './helpers.js';

const slowRun = {
  input: 'slow',
  sim_script: [
    { type: 'delta', text: 'one ' },
    { type: 'sleep', ms: 5000 },
    { type: 'complete', output: 'one' },
  ],
};

describe('hermes-aip invoke run_start with the journal on', { timeout: 60_000 }, () => {
  it('leaves the run journal following for the next process', async () => {
    const { configPath, folder } = await simulatorWithConfig({ profile: 'v0.22' });
    const config = JSON.parse(readFileSync(configPath, 'utf8')) as Record<string, unknown>;
    writeFileSync(join(folder, 'hook.secret'), `whsec_${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
    // A webhook whose receiver is down: the outbox has a delivery to stop when the command closes.
    const webhooks = [{ url: 'http://127.0.0.1:9/hook', secretFile: 'hook.secret', allowLoopbackHttp: true }];
    writeFileSync(configPath, JSON.stringify({ ...config, ledger: { sqlite: 'ledger.db' }, journal: { leaseMs: 1000 }, webhooks }));
    const start = await runCli([
      'invoke',
      'cap:hermes_agent:local:run_start',
      '--input',
      JSON.stringify({ body: slowRun }),
      '--idempotency-key',
      'invoke-journal-1',
      '--config',
      configPath,
    ]);
    expect(start.code, start.stdout + start.stderr).toBe(0);
    const db = new Database(join(folder, 'ledger.db'), { readonly: true });
    try {
      const journals = db.prepare('SELECT state, close_reason, events_lost FROM run_journals').all();
      expect(journals).toEqual([{ state: 'following', close_reason: null, events_lost: '[]' }]);
    } finally {
      db.close();
    }
  });
});
