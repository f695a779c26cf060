/**
 * A bridge process killed mid-run (SIGKILL: nothing flushed, nothing closed) and recovered
 * from its durable ledger by a new process: exactly one final result for the tool call, no
 * second Hermes run, and a run Hermes no longer knows is reported as failed ("Evidence lost"),
 * never as completed. The new process is the same replica restarted (same bridgeId), so it
 * takes the jobs back at once; a different bridge waits for the dead one's job lease to expire.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import type { BridgeJob, RunLedger } from 'aip-connector-hermes-agent';
import type { RunStep } from 'aip-connector-hermes-agent/simulator';
import { eventually } from '../helpers/harness.js';
import { SHARED_BACKENDS, type SharedStore } from '../helpers/bridge-ledgers.js';
import {
  ENDPOINT,
  HERM_KEY,
  HERMES_KEY,
  acceptedFinals,
  acceptedRunning,
  approveRun,
  bridgeEnvFactory,
  callTool,
  hermesRunRequests,
  hermesStarts,
  newSessionId,
  postedResults,
  textOf,
  type BridgeEnv,
} from '../helpers/bridge-env.js';
import type { BridgeProcessConfig } from './fixtures/bridge-process.js';

const startEnv = bridgeEnvFactory();
const FIXTURE = fileURLToPath(new URL('./fixtures/bridge-process.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const OUTPUT = 'Render completed while the bridge was down.';
/** A child process with tsx takes seconds to start on a loaded machine: a hang guard, not a timing assertion. */
const SLOW = 60_000;

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** The replica id of the killed process and of the process that recovers it. */
const REPLICA = 'bridge-replica-1';

/** Starts the bridge process on the store, hands it the tool use, and resolves with the job it reported once the kickoff was settled. */
function startBridgeProcess(
  env: BridgeEnv,
  store: SharedStore,
  sessionId: string,
  event: Record<string, unknown>,
  owner: Pick<BridgeProcessConfig, 'bridgeId' | 'jobLeaseMs'>,
): Promise<{ child: ChildProcess; job: BridgeJob }> {
  const config: BridgeProcessConfig = {
    ledger: store.spec,
    hermes: { url: env.hermes.url, apiKey: HERMES_KEY, endpointId: ENDPOINT },
    herm: { url: env.herm.url, apiKey: HERM_KEY },
    sessionId,
    event,
    ...owner,
  };
  const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE], {
    cwd: ROOT,
    env: { ...process.env, BRIDGE_PROCESS_CONFIG: JSON.stringify(config) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
      const line = stdout.split('\n').find((item) => item.startsWith('{'));
      if (line && stdout.includes('\n')) resolve({ child, job: (JSON.parse(line) as { job: BridgeJob }).job });
    });
    child.once('exit', (code, signal) => reject(new Error(`the bridge process ended (${code ?? signal}) before reporting its kickoff:\n${stderr}`)));
  });
}

async function kill(child: ChildProcess): Promise<void> {
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGKILL');
  await exited;
  expect(child.signalCode).toBe('SIGKILL');
}

/** A run held at an approval that nobody answers until the test does. */
const held = (): RunStep[] => [
  { type: 'delta', text: 'Rendering' },
  { type: 'approval', command: 'upload ./render.mp4', description: 'upload' },
  { type: 'tool', tool: 'terminal' },
  { type: 'complete', output: OUTPUT },
];

/** Exactly one accepted final result, completed with the run's output, from one run; nothing left unfinished. */
async function expectOneCompletedResult(env: BridgeEnv, ledger: RunLedger, sessionId: string, toolUseId: string): Promise<void> {
  const finals = acceptedFinals(env.herm, sessionId, toolUseId);
  expect(finals).toHaveLength(1);
  expect(finals[0]).toMatchObject({ status: 'completed', content: [{ type: 'text', text: OUTPUT }] });
  expect(env.herm.continuations(sessionId, toolUseId)).toBe(1);
  expect(env.hermes.startCount()).toBe(1);
  expect(await ledger.unfinishedJobs()).toEqual([]);
}

/** Kills a bridge process right after its kickoff was accepted, with the run still going in Hermes. */
async function killedMidRun(
  env: BridgeEnv,
  store: SharedStore,
  steps: RunStep[],
  checkStillRunning = true,
  owner: Pick<BridgeProcessConfig, 'bridgeId' | 'jobLeaseMs'> = { bridgeId: REPLICA },
) {
  const sessionId = newSessionId();
  const use = callTool(env.herm, sessionId, { prompt: 'Render the trailer', sim_script: steps });
  const { child, job } = await startBridgeProcess(env, store, sessionId, { ...use }, owner);
  expect(job).toMatchObject({ lease_owner: owner.bridgeId });
  expect(job).toMatchObject({ session_id: sessionId, tool_use_id: use.tool_use_id, kickoff: 'accepted', state: 'running' });
  const runId = job.run_id as string;
  await kill(child);

  // What the dead process left: one start, one accepted kickoff, no final; an unfinished job in the ledger.
  expect(env.hermes.startCount()).toBe(1);
  expect(postedResults(env.herm, sessionId).map((posted) => posted.status)).toEqual(['running']);
  expect(acceptedRunning(env.herm, sessionId, use.tool_use_id)).toHaveLength(1);
  if (checkStillRunning) expect(env.hermes.run(runId)?.status).not.toMatch(/^(completed|failed|cancelled)$/);
  return { sessionId, use, runId, kickoffEventId: job.kickoff_event_id };
}

describe.each(SHARED_BACKENDS)('recovery after the bridge process was killed ($name ledger)', (backend) => {
  it(
    'the run completes while no bridge runs; recover() posts exactly one completed result',
    async () => {
      const env = await startEnv();
      const store = await backend.create();
      const { sessionId, use, runId, kickoffEventId } = await killedMidRun(env, store, held());
      // The run goes on without any bridge: it is answered and completes in Hermes.
      await approveRun(env, runId);
      await eventually(() => env.hermes.run(runId)?.status === 'completed', 'the run completed in Hermes', 2000);
      expect(acceptedFinals(env.herm, sessionId, use.tool_use_id)).toHaveLength(0);

      const ledger = store.open();
      expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({
        run_id: runId,
        state: 'running',
        kickoff: 'accepted',
        kickoff_event_id: kickoffEventId,
        final_status: null,
      });
      const { bridge } = env.restart(ledger, { bridgeId: REPLICA });
      await bridge.recover();
      await bridge.idle();

      const finals = acceptedFinals(env.herm, sessionId, use.tool_use_id);
      expect(finals).toHaveLength(1);
      expect(finals[0]).toMatchObject({ tool_use_id: use.tool_use_id, status: 'completed', is_error: false, content: [{ type: 'text', text: OUTPUT }] });
      expect(postedResults(env.herm, sessionId).map((posted) => posted.status)).toEqual(['running', 'completed']);
      expect(env.herm.history(sessionId)).toEqual(finals);
      expect(env.herm.continuations(sessionId, use.tool_use_id)).toBe(1);
      expect(env.hermes.startCount()).toBe(1);
      expect(hermesStarts(env.hermes)).toHaveLength(1);
      expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({
        state: 'done',
        kickoff: 'accepted',
        final_status: 'completed',
        final_event_id: finals[0]?.id,
      });
      expect(await ledger.unfinishedJobs()).toEqual([]);

      // A second recover() has nothing left to do.
      const hermRequests = env.herm.requests.length;
      const hermesRequests = env.hermes.requests.length;
      await bridge.recover();
      await bridge.idle();
      expect(env.herm.requests).toHaveLength(hermRequests);
      expect(env.hermes.requests).toHaveLength(hermesRequests);
    },
    SLOW,
  );

  it(
    'a sleeping run: killed, then recovered after it completed, one completed result',
    async () => {
      const env = await startEnv();
      const store = await backend.create();
      const { sessionId, use, runId } = await killedMidRun(
        env,
        store,
        [
          { type: 'delta', text: 'Rendering' },
          { type: 'sleep', ms: 800 },
          { type: 'complete', output: OUTPUT },
        ],
        false,
      );
      await eventually(() => env.hermes.run(runId)?.status === 'completed', 'the run completed in Hermes', 2000);
      const ledger = store.open();
      const { bridge } = env.restart(ledger, { bridgeId: REPLICA });
      await bridge.recover();
      await bridge.idle();
      await expectOneCompletedResult(env, ledger, sessionId, use.tool_use_id);
    },
    SLOW,
  );

  it(
    'the run is still going when the new process recovers: it is followed to its end, one completed result',
    async () => {
      const env = await startEnv();
      const store = await backend.create();
      const { sessionId, use, runId } = await killedMidRun(env, store, held());
      const ledger = store.open();
      const { bridge } = env.restart(ledger, { bridgeId: REPLICA });
      await bridge.recover();
      // The new process reads the run's status (still waiting) and follows it; only then is it answered and completes.
      await eventually(() => hermesRunRequests(env.hermes, runId, '').length >= 1, 'the recovered bridge read the run status', 2000);
      expect(env.hermes.run(runId)?.status).toBe('waiting_for_approval');
      await approveRun(env, runId);
      await bridge.idle();

      expect(env.hermes.run(runId)?.status).toBe('completed');
      const finals = acceptedFinals(env.herm, sessionId, use.tool_use_id);
      expect(finals).toHaveLength(1);
      expect(finals[0]).toMatchObject({ status: 'completed', is_error: false, content: [{ type: 'text', text: OUTPUT }] });
      expect(postedResults(env.herm, sessionId).map((posted) => posted.status)).toEqual(['running', 'completed']);
      expect(env.herm.continuations(sessionId, use.tool_use_id)).toBe(1);
      expect(env.hermes.startCount()).toBe(1);
      expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'done', final_status: 'completed' });

      await bridge.recover();
      await bridge.idle();
      expect(acceptedFinals(env.herm, sessionId, use.tool_use_id)).toHaveLength(1);
      expect(postedResults(env.herm, sessionId)).toHaveLength(2);
    },
    SLOW,
  );

  it(
    'Hermes forgot the run (restarted): the final is failed with "Evidence lost", never completed',
    async () => {
      const env = await startEnv();
      const store = await backend.create();
      const { sessionId, use, runId } = await killedMidRun(env, store, [
        { type: 'delta', text: 'Rendering' },
        { type: 'sleep', ms: 60_000 },
        { type: 'complete', output: OUTPUT },
      ]);
      env.hermes.restart();
      const ledger = store.open();
      const { bridge } = env.restart(ledger, { bridgeId: REPLICA });
      await bridge.recover();
      await bridge.idle();

      const finals = acceptedFinals(env.herm, sessionId, use.tool_use_id);
      expect(finals).toHaveLength(1);
      expect(finals[0]).toMatchObject({ tool_use_id: use.tool_use_id, status: 'failed', is_error: true });
      const text = textOf(finals[0] as Record<string, unknown>);
      expect(text).toContain('Evidence lost');
      expect(text).toContain(runId);
      expect(text).not.toContain(OUTPUT);
      expect(postedResults(env.herm, sessionId).map((posted) => posted.status)).toEqual(['running', 'failed']);
      expect(env.herm.continuations(sessionId, use.tool_use_id)).toBe(1);
      expect(env.hermes.startCount()).toBe(1);
      expect(await ledger.job(sessionId, use.tool_use_id)).toMatchObject({ state: 'done', final_status: 'failed' });

      await bridge.recover();
      await bridge.idle();
      expect(postedResults(env.herm, sessionId)).toHaveLength(2);
    },
    SLOW,
  );

  it(
    "another bridge takes the dead process's job over only once its lease has expired, then posts one result",
    async () => {
      const env = await startEnv();
      const store = await backend.create();
      const leaseMs = 1500;
      const { sessionId, use, runId } = await killedMidRun(env, store, held(), true, { bridgeId: 'bridge-replica-dead', jobLeaseMs: leaseMs });
      const ledger = store.open();
      const killedJob = (await ledger.job(sessionId, use.tool_use_id)) as BridgeJob;
      expect(killedJob.lease_owner).toBe('bridge-replica-dead');
      const { bridge } = env.restart(ledger, { bridgeId: 'bridge-replica-2', jobLeaseMs: leaseMs });
      await bridge.recover();
      // Until the dead process's lease runs out the job is not touched: no status read, owner unchanged.
      if (Date.now() < (killedJob.lease_expires_at as number) - 200) {
        expect(hermesRunRequests(env.hermes, runId, '')).toHaveLength(0);
        expect((await ledger.job(sessionId, use.tool_use_id))?.lease_owner).toBe('bridge-replica-dead');
      }
      await eventually(async () => (await ledger.job(sessionId, use.tool_use_id))?.lease_owner === 'bridge-replica-2', 'the job was taken over', 700);
      expect(Date.now()).toBeGreaterThanOrEqual(killedJob.lease_expires_at as number);
      await approveRun(env, runId);
      await bridge.idle();
      await expectOneCompletedResult(env, ledger, sessionId, use.tool_use_id);
    },
    SLOW,
  );
});
