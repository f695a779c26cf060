/**
 * `npm run torture [-- --kills N --ledger sqlite|postgres --seed S --repeat R]` (issue #17, part 1):
 * see torture.ts. Prints one line per round on stderr and the JSON summary on stdout; exit code 0
 * only when no invariant was violated. `--repeat R` runs the torture R times in a row (seeds S,
 * S+1, …), one line per run on stderr, and prints the summaries with how many runs were clean.
 *
 * Other options: --pg-restarts N (restart the PostgreSQL cluster N times mid-run; needs root and
 * HERMES_TORTURE_PG_RESTART=1 or CI, since it disturbs every other user of that cluster),
 * --broken-ledger claim-always|skip-delivery (a ledger whose claim ignores every lease, or whose
 * outbox records an event more as delivered than was: the run must fail).
 * PostgreSQL needs HERMES_TORTURE_PG_URL (a cluster of the torture's own, as .ci/run makes) or
 * HERMES_TEST_PG_URL.
 */
import { clusterRestartCommand } from './pg-cluster.js';
import { runTorture, type TortureOptions, type TortureSummary } from './torture.js';

function argument(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`);
  return index === -1 ? undefined : process.argv[index + 1];
}

function usage(problem: string): never {
  console.error(`torture: ${problem}`);
  console.error(
    'usage: npm run torture [-- --kills N] [--ledger sqlite|postgres] [--seed S] [--repeat R] [--pg-restarts N] [--broken-ledger claim-always|skip-delivery]',
  );
  process.exit(64);
}

function integer(name: string, fallback: number): number {
  const raw = argument(name);
  const value = raw === undefined ? fallback : Number(raw);
  if (!Number.isInteger(value) || value < 0) usage(`--${name} must be a non-negative integer`);
  return value;
}

/** The restart command of the cluster behind `url`, only where restarting the server is allowed. */
function pgRestartCommand(restarts: number, url: string | undefined): string[] | undefined {
  if (restarts === 0 || url === undefined) return undefined;
  const allowed = process.env.HERMES_TORTURE_PG_RESTART === '1' || Boolean(process.env.CI);
  if (!allowed || process.getuid?.() !== 0) usage('--pg-restarts needs root and HERMES_TORTURE_PG_RESTART=1 (or CI)');
  return clusterRestartCommand(url);
}

const ledger = argument('ledger') ?? 'sqlite';
if (ledger !== 'sqlite' && ledger !== 'postgres') usage('--ledger must be sqlite or postgres');
const broken = argument('broken-ledger');
if (broken !== undefined && broken !== 'claim-always' && broken !== 'skip-delivery') usage('--broken-ledger must be claim-always or skip-delivery');
const pgRestarts = integer('pg-restarts', 0);
// A cluster of the torture's own, when there is one: its restarts disturb nobody else.
const pgUrl = process.env.HERMES_TORTURE_PG_URL ?? process.env.HERMES_TEST_PG_URL;
const options: TortureOptions = {
  kills: integer('kills', 100),
  ledger,
  seed: integer('seed', 20260517),
  pgUrl,
  pgRestarts,
  pgRestartCommand: pgRestartCommand(pgRestarts, pgUrl),
  brokenLedger: broken,
  log: (line) => console.error(line),
};
if (ledger === 'postgres' && !options.pgUrl) usage('--ledger postgres needs HERMES_TORTURE_PG_URL or HERMES_TEST_PG_URL');

const repeat = integer('repeat', 1);
if (repeat === 0) usage('--repeat must be at least 1');

/** One run's figures on one line. */
function runLine(run: number, summary: TortureSummary): string {
  const faults = summary.pg_faults;
  const database =
    summary.ledger === 'postgres'
      ? `; database faults ${faults.rounds} rounds (${faults.backends_terminated} backends ended, ${faults.server_restarts} restarts, ${summary.ledger_unavailable_answers} ledger_unavailable answers retried)`
      : '';
  const verdict = summary.violations.length === 0 ? 'clean' : `FAILED: ${summary.violations[0]}`;
  return `run ${run}/${repeat} (seed ${summary.seed}): ${summary.actions} actions, ${summary.kills} kills${database}; duplicates ${summary.duplicates}, lost ${summary.lost}; events ${summary.delivery.events_journaled} journaled, ${summary.delivery.deliveries} deliveries (${summary.delivery.duplicate_deliveries} duplicate), ${summary.delivery.lost_events} lost, ${summary.delivery.reordered} reordered; ${summary.seconds} s; ${verdict}`;
}

const summaries: TortureSummary[] = [];
for (let run = 1; run <= repeat; run++) {
  const summary = await runTorture({ ...options, seed: options.seed + run - 1 });
  summaries.push(summary);
  if (repeat > 1) console.error(runLine(run, summary));
}
const clean = summaries.filter((summary) => summary.violations.length === 0).length;
console.log(JSON.stringify(repeat === 1 ? summaries[0] : { runs: repeat, clean, summaries }, null, 2));
process.exitCode = clean === repeat ? 0 : 1;
