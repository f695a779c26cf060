import { execFileSync } from 'node:child_process';

/**
 * The command that restarts the local PostgreSQL cluster listening on the URL's port (Debian's
 * `pg_ctlcluster`, as `.ci/run` installs it). The torture restarts only that cluster, so a
 * cluster of its own (`HERMES_TORTURE_PG_URL`) leaves every other suite's server alone.
 */
export function clusterRestartCommand(url: string): string[] {
  const port = new URL(url).port || '5432';
  const clusters = execFileSync('pg_lsclusters', ['--no-header'], { encoding: 'utf8' });
  for (const line of clusters.split('\n')) {
    const [version, name, clusterPort] = line.trim().split(/\s+/);
    if (version && name && clusterPort === port) return ['pg_ctlcluster', version, name, 'restart'];
  }
  throw new Error(`no local PostgreSQL cluster listens on port ${port} (pg_lsclusters)`);
}
