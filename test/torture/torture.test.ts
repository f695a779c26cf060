/**
 * The crash torture in its bounded form inside `npm test` (`npm run torture` is the full one):
 * 10 SIGKILLs on SQLite, 5 on PostgreSQL with backends ended mid-run and, on a cluster of its own
 * (HERMES_TORTURE_PG_URL, which .ci/run creates; run as root), the server restarted mid-run; and
 * broken ledgers that must fail. Every run journals its runs and delivers every event to a
 * misbehaving webhook receiver: nothing may be lost, reordered or given up. Without a cluster of its own the server is not restarted, since
 * that would break the other PostgreSQL suites running beside this one.
 */
import { describe, expect, it } from 'vitest';
import { PG_URL } from '../helpers/ledgers.js';
import { clusterRestartCommand } from './pg-cluster.js';
import { runTorture, type TortureSummary } from './torture.js';

const TORTURE_PG_URL = process.env.HERMES_TORTURE_PG_URL;
if (process.env.CI && !TORTURE_PG_URL)
  throw new Error('HERMES_TORTURE_PG_URL is not set in CI: the torture restarts a PostgreSQL cluster of its own (see .ci/run)');
const restartable = TORTURE_PG_URL !== undefined && process.getuid?.() === 0;

/** Minutes on a loaded 2-core machine at worst: a hang guard, not a timing assertion. */
const SLOW = 300_000;

function expectClean(summary: TortureSummary, kills: number): void {
  const shown = JSON.stringify(summary, null, 2);
  expect(summary.violations, shown).toEqual([]);
  expect(summary.kills, shown).toBe(kills);
  expect(summary.duplicates).toBe(0);
  expect(summary.lost).toBe(0);
  expect(summary.delivery.lost_events, shown).toBe(0);
  expect(summary.delivery.reordered, shown).toBe(0);
  expect(summary.delivery.events_journaled, shown).toBeGreaterThan(0);
  // Which actions a kill leaves unknown depends on timing; that work still gets done does not.
  expect(summary.outcomes.completed ?? 0, shown).toBeGreaterThan(0);
}

describe('crash torture', () => {
  it(
    'SQLite: 10 kills at random and targeted moments, nothing duplicated or lost',
    async () => {
      expectClean(await runTorture({ kills: 10, ledger: 'sqlite', seed: 17 }), 10);
    },
    SLOW,
  );

  it.skipIf(!PG_URL && !TORTURE_PG_URL)(
    `PostgreSQL: 5 kills, backends ended${restartable ? ' and the server restarted' : ''} mid-run, the connector recovering by itself`,
    async () => {
      const pgUrl = TORTURE_PG_URL ?? PG_URL;
      const summary = await runTorture({
        kills: 5,
        ledger: 'postgres',
        seed: 23,
        pgUrl,
        pgRestarts: restartable ? 1 : 0,
        pgRestartCommand: restartable ? clusterRestartCommand(pgUrl as string) : undefined,
      });
      expectClean(summary, 5);
      expect(summary.pg_faults.rounds, JSON.stringify(summary)).toBeGreaterThan(0);
      if (restartable) expect(summary.pg_faults.server_restarts, JSON.stringify(summary)).toBe(1);
    },
    SLOW,
  );

  it(
    'a ledger whose claim ignores every lease makes the torture fail',
    async () => {
      const summary = await runTorture({ kills: 3, ledger: 'sqlite', seed: 17, brokenLedger: 'claim-always' });
      expect(summary.duplicates).toBeGreaterThan(0);
      expect(summary.violations.some((problem) => problem.includes('POST /v1/runs reached Hermes'))).toBe(true);
    },
    SLOW,
  );

  it(
    'an outbox that records an event more as delivered than was makes the torture fail',
    async () => {
      const summary = await runTorture({ kills: 3, ledger: 'sqlite', seed: 17, brokenLedger: 'skip-delivery' });
      expect(summary.delivery.lost_events, JSON.stringify(summary)).toBeGreaterThan(0);
      expect(summary.violations.some((problem) => problem.includes('never accepted by the receiver'))).toBe(true);
    },
    SLOW,
  );
});
