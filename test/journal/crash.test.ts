/**
 * The journal through crashes: a child process follows runs into a durable ledger and is
 * SIGKILLed at seeded random instants (while it follows, appends, and takes journals over from the
 * child killed before it), again and again; a last child reads every run. Every event the
 * simulator sent must be in the run's journal exactly once, in order, or the gap be recorded in
 * `events_lost`; no journal is left following. The simulator runs here, so its record of every
 * event outlives the kills. A Hermes that numbers its events (`later`) must leave every journal whole.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createPostgresLedger, createSqliteLedger, type HermesSseEvent } from 'aip-connector-hermes-agent';
import { startHermesSimulator, type SimulatorProfile } from 'aip-connector-hermes-agent/simulator';
import { journalStoreOf, type JournalStore } from '../../src/journal/types.js';
import { API_KEY, nextId } from '../helpers/harness.js';
import { createPgSchema, PG_URL } from '../helpers/ledgers.js';
import { seededRandom } from '../helpers/seeded-random.js';
import type { CrashChildConfig } from './crash-child.js';

const CHILD = fileURLToPath(new URL('./crash-child.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const KILLS = 6;
const RUNS = 4;
const LEASE_MS = 300;
/** A hang guard on a loaded 2-core machine, not a timing assertion. */
const SLOW = 240_000;

const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Child {
  lines: Array<Record<string, unknown>>;
  /** Resolves with the first line `match` accepts (rejects if the child exits first). */
  line(match: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  exited: Promise<number | null>;
  kill(): Promise<void>;
}

function startChild(config: CrashChildConfig): Child {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD], {
    cwd: ROOT,
    env: { ...process.env, JOURNAL_CRASH_CONFIG: JSON.stringify(config) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Array<Record<string, unknown>> = [];
  const waiters: Array<() => void> = [];
  let pending = '';
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdout.on('data', (chunk: Buffer) => {
    pending += chunk.toString();
    const parts = pending.split('\n');
    pending = parts.pop() ?? '';
    for (const part of parts) if (part.trim() !== '') lines.push(JSON.parse(part) as Record<string, unknown>);
    for (const wake of waiters.splice(0)) wake();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  exited.then(() => {
    for (const wake of waiters.splice(0)) wake();
  });
  let done = false;
  void exited.then(() => (done = true));
  return {
    lines,
    async line(match) {
      for (;;) {
        const found = lines.find(match);
        if (found) return found;
        if (done) throw new Error(`the child exited without the line awaited: ${stderr.slice(-2000)}`);
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
    },
    exited,
    async kill() {
      if (!done) child.kill('SIGKILL');
      await exited;
    },
  };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const plannedRuns = (): CrashChildConfig['runs'] =>
  Array.from({ length: RUNS }, () => ({
    key: nextId('crash'),
    script: [...Array.from({ length: 40 }, (_, index) => ({ type: 'delta', text: `d${index} ` })), { type: 'complete', output: 'done' }],
  }));

/** What is wrong with one run's journal, against what the simulator sent. */
function violations(sent: Array<Record<string, unknown>>, stored: HermesSseEvent[], state: string, lostGaps: number, numbered: boolean): string[] {
  const problems: string[] = [];
  const label = (event: { event: string; delta?: unknown }) => `${event.event}|${String(event.delta ?? '')}`;
  const sentLabels = sent.map((event) => label(event as { event: string; delta?: unknown }));
  const storedLabels = stored.map((event) => label({ event: event.event, delta: event.data['delta'] }));
  if (state === 'following') problems.push('left following');
  if (new Set(storedLabels).size !== storedLabels.length) problems.push('an event stored twice');
  let cursor = 0;
  for (const storedLabel of storedLabels) {
    cursor = sentLabels.indexOf(storedLabel, cursor) + 1;
    if (cursor === 0) problems.push(`stored out of order or never sent: ${storedLabel}`);
  }
  if (numbered && stored.map((event) => event.data['seq']).join() !== sent.map((event) => event['seq']).join())
    problems.push('not every numbered event, once, in order');
  if (stored.length < sent.length && lostGaps === 0) problems.push(`${sent.length - stored.length} events missing and no gap recorded`);
  return problems;
}

type Backend = { name: 'sqlite' | 'postgres'; ledger(): Promise<CrashChildConfig['ledger']> };
const BACKENDS: Backend[] = [
  {
    name: 'sqlite',
    async ledger() {
      const dir = mkdtempSync(join(tmpdir(), 'aip-journal-crash-'));
      cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
      return { kind: 'sqlite', path: join(dir, 'ledger.db') };
    },
  },
];
if (PG_URL) {
  BACKENDS.push({
    name: 'postgres',
    async ledger() {
      const schema = await createPgSchema('aip_journal_crash');
      cleanups.push(schema.drop);
      return { kind: 'postgres', connectionString: schema.connectionString };
    },
  });
}

describe.each(BACKENDS)('run journal through SIGKILLs on $name', (backend) => {
  it.each<[SimulatorProfile, number]>([
    ['later', 26],
    ['v0.20', 27],
  ])(
    `Hermes %s: ${KILLS} kills while following, appending and taking over; every event once, in order, or the gap recorded`,
    async (profile, seed) => {
      const random = seededRandom(seed);
      const sim = await startHermesSimulator({ apiKey: API_KEY, profile, stepDelayMs: 25, streamLookupMs: 200, keepaliveMs: 200 });
      cleanups.push(() => sim.close());
      const ledger = await backend.ledger();
      const base = { baseUrl: sim.url, apiKey: API_KEY, ledger, leaseMs: LEASE_MS, runs: plannedRuns(), runIds: [] as string[] };

      const starter = startChild({ ...base, mode: 'start' });
      await starter.line((line) => line['ready'] === true);
      const runIds = starter.lines.filter((line) => typeof line['started'] === 'string').map((line) => line['started'] as string);
      await pause(random() * 300);
      await starter.kill();
      for (let kill = 1; kill < KILLS; kill++) {
        const follower = startChild({ ...base, mode: 'follow' });
        // Past one lease the new child has taken the journals over; kills land before, during and after.
        await pause(LEASE_MS / 2 + random() * LEASE_MS * 3);
        await follower.kill();
      }
      const finisher = startChild({ ...base, mode: 'finish', runIds });
      expect(await finisher.exited).toBe(0);

      const reader = ledger.kind === 'sqlite' ? createSqliteLedger({ path: ledger.path }) : createPostgresLedger({ connectionString: ledger.connectionString });
      cleanups.push(() => reader.close());
      const store = journalStoreOf(reader) as JournalStore;
      const found: Record<string, string[]> = {};
      for (const runId of runIds) {
        const key = { tenant_id: null, endpoint_id: 'local', run_id: runId };
        const record = await store.journal(key);
        const stored = (await store.events(key, 0, 100_000)).map((entry) => entry.event);
        const problems = violations(sim.run(runId)?.events ?? [], stored, record?.state ?? 'missing', record?.events_lost.length ?? 0, profile === 'later');
        if (profile === 'later' && record?.state !== 'complete') problems.push(`state ${record?.state}, ${JSON.stringify(record?.events_lost)}`);
        if (problems.length > 0) found[runId] = problems;
      }
      expect(found).toEqual({});
      expect(runIds).toHaveLength(RUNS);
    },
    SLOW,
  );
});
