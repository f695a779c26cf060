/**
 * How long 0.19.0 holds an unanswered approval when nothing configures it: 60 s (it reads
 * `approvals.timeout`), not the reference's 300 s, and the simulator's `v0.19` profile agrees.
 * Measured on both, side by side: the time from `approval.request` to the failed `tool.completed`.
 * The bounds are wide (a 60 s default against a 300 s one), not a timing target.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createHermesConnector, type RunEventsOutput } from 'aip-connector-hermes-agent';
import { startHermesSimulator, type HermesSimulator } from 'aip-connector-hermes-agent/simulator';
import { checkedConnector, ENDPOINT, type CheckedConnector } from '../helpers/harness.js';
import { HERMES_VERSIONS, START_TIMEOUT_MS, startRealEndpoint, type RealEndpoint } from './support.js';

const VERSION = '0.19.0';
const SIM_KEY = 'sk-sim-default-timeout-0123456789';

let real: RealEndpoint | undefined;
let sim: HermesSimulator | undefined;
let simulated: CheckedConnector | undefined;

beforeAll(async () => {
  if (!HERMES_VERSIONS.includes(VERSION)) return;
  real = await startRealEndpoint({ version: VERSION, approvalTimeoutSeconds: 'release default' });
  sim = await startHermesSimulator({ apiKey: SIM_KEY, profile: 'v0.19' });
  simulated = checkedConnector(createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: sim.url, apiKey: SIM_KEY }] }));
}, START_TIMEOUT_MS);

afterAll(async () => {
  await simulated?.connector.close();
  await sim?.close();
  await real?.close();
}, START_TIMEOUT_MS);

/** Seconds from the approval request to the tool's failure, read from the run's event stream. */
async function secondsHeld(h: CheckedConnector, body: Record<string, unknown>): Promise<number> {
  const runId = await h.startRun(body);
  const seen = new Map<string, number>();
  const events = await h.invoke(
    { capability_id: h.cap('run_events'), input: { run_id: runId } },
    {
      onChunk: (chunk) => {
        const name = (chunk.data as { hermes_sse?: { event?: string } }).hermes_sse?.event;
        if (name && !seen.has(name)) seen.set(name, performance.now());
      },
    },
  );
  expect(events.status, JSON.stringify(events.error)).toBe('completed');
  const output = events.output as RunEventsOutput;
  expect(output.events.find((event) => event.event === 'tool.completed')?.data).toMatchObject({ error: true });
  return ((seen.get('tool.completed') as number) - (seen.get('approval.request') as number)) / 1000;
}

test.skipIf(!HERMES_VERSIONS.includes(VERSION))(
  `real Hermes ${VERSION} and the v0.19 simulator deny an unanswered approval after their 60 s default`,
  async () => {
    const command = 'rm -rf ./held-by-default';
    const [realSeconds, simulatedSeconds] = await Promise.all([
      secondsHeld((real as RealEndpoint).h, { input: `Run the shell command: ${command}` }),
      secondsHeld(simulated as CheckedConnector, {
        input: 'x',
        sim_script: [
          { type: 'approval', command, pattern_key: 'recursive delete' },
          { type: 'tool', tool: 'terminal' },
          { type: 'complete', output: 'done' },
        ],
      }),
    ]);
    for (const seconds of [realSeconds, simulatedSeconds]) {
      expect(seconds).toBeGreaterThanOrEqual(55);
      expect(seconds).toBeLessThan(120);
    }
  },
  200_000,
);
