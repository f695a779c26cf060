/**
 * The journal crash test's child: one journaling connector over the durable ledger the parent
 * names, against the parent's simulator. `start` starts the planned runs (fixed keys, so a
 * repeated start is a replay) and says `ready`; `follow` only follows (and takes over); `finish`
 * reads every run's events from the journal and exits. The parent SIGKILLs `start` and `follow`
 * children at any instant. Prints one JSON line per event.
 *
 * Input: JOURNAL_CRASH_CONFIG, JSON of `CrashChildConfig`.
 */
import { createHermesConnector, createPostgresLedger, createSqliteLedger, type RunEventsOutput } from 'aip-connector-hermes-agent';
import { journalStoreOf, type JournalStore } from '../../src/journal/types.js';

export interface CrashChildConfig {
  mode: 'start' | 'follow' | 'finish';
  baseUrl: string;
  apiKey: string;
  ledger: { kind: 'sqlite'; path: string } | { kind: 'postgres'; connectionString: string };
  leaseMs: number;
  /** Per planned run: its idempotency key and script. */
  runs: Array<{ key: string; script: unknown[] }>;
  /** `finish`: the runs to read. */
  runIds: string[];
}

const config = JSON.parse(process.env.JOURNAL_CRASH_CONFIG ?? '') as CrashChildConfig;
const say = (line: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(line)}\n`);
const ledger =
  config.ledger.kind === 'sqlite'
    ? createSqliteLedger({ path: config.ledger.path })
    : createPostgresLedger({ connectionString: config.ledger.connectionString });
const connector = createHermesConnector({
  endpoints: [{ id: 'local', baseUrl: config.baseUrl, apiKey: config.apiKey }],
  ledger,
  journal: { leaseMs: config.leaseMs },
});

async function startRuns(): Promise<void> {
  for (const [index, run] of config.runs.entries()) {
    const result = await connector.invoke({
      id: `act_crash_${index}`,
      capability_id: 'cap:hermes_agent:local:run_start',
      input: { body: { input: 'crash', sim_script: run.script } },
      idempotency_key: run.key,
    });
    if (result.status !== 'completed') throw new Error(`run_start ${index}: ${result.error?.code ?? result.status}`);
    say({ started: (result.output as { run_id: string }).run_id });
  }
  say({ ready: true });
}

async function finish(): Promise<void> {
  for (const runId of config.runIds) {
    const result = await connector.invoke(
      { id: `act_read_${runId}`, capability_id: 'cap:hermes_agent:local:run_events', input: { run_id: runId, max_events: 100_000 } },
      { deadline: Date.now() + 120_000 },
    );
    say({ read: runId, status: result.status, code: result.error?.code, journal: (result.output as RunEventsOutput | undefined)?.journal });
  }
  await untilClosed();
  await connector.close();
  await ledger.close();
}

/**
 * A reader may get a journal's terminal event before the journal is closed: when its follower died
 * between that append and the close, this process closes it once it takes it over (after the dead
 * follower's lease). Waits for that (bounded only to fail a hung run), so that the parent judges every journal closed.
 */
async function untilClosed(): Promise<void> {
  const store = journalStoreOf(ledger) as JournalStore;
  for (let attempt = 0; attempt < 1200; attempt++) {
    const states = await Promise.all(config.runIds.map((run_id) => store.journal({ tenant_id: null, endpoint_id: 'local', run_id })));
    if (states.every((record) => record?.state !== 'following')) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

if (config.mode === 'start') await startRuns();
else if (config.mode === 'finish') await finish();
// `start` and `follow` children follow until the parent kills them.
if (config.mode !== 'finish') setInterval(() => undefined, 60_000);
