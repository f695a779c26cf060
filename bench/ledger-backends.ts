import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startHermesSimulator, type HermesSimulator, type HermesSimulatorOptions } from 'aip-connector-hermes-agent/simulator';
import type { Figure, SectionResult } from './report.js';
import { BENCH_API_KEY } from './servers.js';

export type DurableBackend = 'sqlite' | 'postgres';

/** A bench section measured on each durable ledger (see eachDurableBackend); `config` gets the backends measured. */
export async function durableBackendsSection(
  section: { id: string; title: string; config: Record<string, unknown> },
  folderPrefix: string,
  simulator: Partial<HermesSimulatorOptions>,
  measure: (backend: DurableBackend, sim: HermesSimulator, dir: string) => Promise<{ figures: Figure[]; rounds: unknown[] }>,
): Promise<SectionResult> {
  const { backends, figures, rounds, errors } = await eachDurableBackend(folderPrefix, simulator, measure);
  return { id: section.id, title: section.title, config: { ...section.config, backends }, figures, rounds, errors };
}

/**
 * Measures each durable ledger this machine has (SQLite; PostgreSQL too with HERMES_TEST_PG_URL) on one
 * in-process simulator and a scratch folder; a backend that fails is an error of the section, not its end.
 */
async function eachDurableBackend(
  folderPrefix: string,
  simulator: Partial<HermesSimulatorOptions>,
  measure: (backend: DurableBackend, sim: HermesSimulator, dir: string) => Promise<{ figures: Figure[]; rounds: unknown[] }>,
): Promise<{ backends: DurableBackend[]; figures: Figure[]; rounds: unknown[]; errors: string[] }> {
  const sim = await startHermesSimulator({ apiKey: BENCH_API_KEY, maxConcurrentRuns: 0, keepaliveMs: 60_000, ...simulator });
  const dir = mkdtempSync(join(tmpdir(), folderPrefix));
  const backends: DurableBackend[] = process.env.HERMES_TEST_PG_URL ? ['sqlite', 'postgres'] : ['sqlite'];
  const figures: Figure[] = [];
  const rounds: unknown[] = [];
  const errors: string[] = [];
  try {
    for (const backend of backends) {
      try {
        const measured = await measure(backend, sim, dir);
        figures.push(...measured.figures);
        rounds.push(...measured.rounds);
      } catch (error) {
        errors.push(`${backend}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  } finally {
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return { backends, figures, rounds, errors };
}
