/**
 * Crashes and restarts against durable ledgers (SQLite, and PostgreSQL when configured):
 *  (a) a connector process killed with SIGKILL while its run_start is in flight: the claim it
 *      left is never re-executed; replays answer outcome_unknown and no second start is sent;
 *  (b) a connector that closes and a new one on the same store: evidence survives, reconcile()
 *      re-reads only the open binding, and after a Hermes restart records it as evidence lost.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { createHermesConnector, type AipActionResult, type HermesConnector, type RunEvidence } from 'aip-connector-hermes-agent';
import { API_KEY, ENDPOINT, eventually, harnessFactory, nextId, script } from '../helpers/harness.js';
import { INSPECTABLE_BACKENDS } from '../helpers/ledger-stores.js';
import { startBlackHole } from '../helpers/ledger-black-hole.js';
import { providerKeyOf } from '../helpers/provider-key.js';
import { startRecordingProxy } from '../helpers/recording-proxy.js';

const PREFIX = 'connector.hermes_agent.';
const FIXTURE = fileURLToPath(new URL('./fixtures/start-in-child.mjs', import.meta.url));
const START_CAPABILITY = `cap:hermes_agent:${ENDPOINT}:run_start`;
const UNKNOWN_RUN = `run_${'e'.repeat(32)}`;

const harness = harnessFactory({ simulator: { streamLookupMs: 100 } });

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Child {
  process: ChildProcess;
  output(): string;
  exited(): { code: number | null; signal: NodeJS.Signals | null } | undefined;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function spawnChild(env: Record<string, string>): Child {
  const child = spawn(process.execPath, [FIXTURE], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  let status: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => {
      status = { code, signal };
      resolve(status);
    });
  });
  cleanups.push(async () => {
    if (status === undefined) {
      child.kill('SIGKILL');
      await exit;
    }
  });
  return { process: child, output: () => output, exited: () => status, exit };
}

/** Requests to the runs API (reading what the endpoint declares is not one). */
const runRequests = (h: { sim: { requests: Array<{ method: string; path: string }> } }) =>
  h.sim.requests.filter((request) => request.path.startsWith('/v1/runs'));

describe.each(INSPECTABLE_BACKENDS)('crash recovery: $name ledger', (backend) => {
  it('a process killed mid-start: the replay is outcome_unknown and no second start reaches Hermes', { timeout: 60_000 }, async () => {
    const store = await backend.create();
    const hole = await startBlackHole();
    cleanups.push(() => hole.close());
    const key = nextId('key');
    const body = { input: 'crash me', sim_script: script.quick() };
    const childAction = { id: nextId('act_child'), capability_id: START_CAPABILITY, input: { body }, idempotency_key: key };

    const child = spawnChild({
      ...store.env,
      ENDPOINT_ID: ENDPOINT,
      BASE_URL: hole.url,
      API_KEY,
      LEASE_MS: '300',
      ACTION: JSON.stringify(childAction),
    });
    const inspector = store.open();
    const scope = { capability_id: START_CAPABILITY, idempotency_key: key };
    // Bounded only so that a broken child fails the test instead of hanging it.
    await eventually(
      () => {
        const exited = child.exited();
        if (exited) throw new Error(`the child exited early (${JSON.stringify(exited)}): ${child.output()}`);
        return hole.received.some((request) => request.method === 'POST' && request.url === '/v1/runs') || undefined;
      },
      'the child to send its POST /v1/runs',
      2_000,
    );
    const inFlight = await inspector.get(scope, Date.now());
    expect(inFlight).toMatchObject({ state: 'in_flight', action_id: childAction.id, result: null });
    expect(inFlight?.lease_owner).toContain(`:${child.process.pid}:`);
    const sent = hole.received.find((request) => request.url === '/v1/runs');
    expect(sent?.headers['idempotency-key']).toBe(providerKeyOf(START_CAPABILITY, key));
    expect(JSON.parse(sent?.body ?? 'null')).toEqual(body);

    child.process.kill('SIGKILL');
    expect(await child.exit).toEqual({ code: null, signal: 'SIGKILL' });
    expect(child.output()).not.toContain('"result"');

    // The process after the crash: same store, same endpoint id, now pointed at a real Hermes.
    const h = await harness({ connector: { ledger: store.open(), idempotencyLeaseMs: 300 } });
    const first = await h.invoke({ capability_id: START_CAPABILITY, input: { body }, idempotency_key: key });
    expect(first.status).toBe('failed');
    expect(first.output).toBeUndefined();
    expect(first.error).toMatchObject({ code: `${PREFIX}outcome_unknown`, category: 'connector', retryable: false });
    expect(first.error?.details?.uncertain_outcome).toBe(true);
    expect(first.error?.details?.original_action_id).toBe(childAction.id);
    expect(first.receipt).toEqual({ replayed: true, replayed_by: 'connector', original_action_id: childAction.id });
    expect(h.sim.requests.filter((request) => request.method === 'POST' && request.path === '/v1/runs')).toHaveLength(0);
    expect(h.sim.startCount()).toBe(0);

    const second = await h.invoke({ capability_id: START_CAPABILITY, input: { body }, idempotency_key: key });
    expect(second).toEqual({ ...first, action_id: second.action_id });
    expect(second.receipt?.replayed).toBe(true);
    // Only what the endpoint declares was read (it declares no durable run idempotency): no run route was asked.
    expect(runRequests(h)).toHaveLength(0);

    // The verdict is stored: a ledger opened afterwards finds it settled, and another input is a conflict.
    const settled = await inspector.get(scope, Date.now());
    expect(settled).toMatchObject({ state: 'done', action_id: childAction.id, lease_owner: null, lease_expires_at: null });
    expect(settled?.result?.error?.code).toBe(`${PREFIX}outcome_unknown`);
    const other = await h.invoke({ capability_id: START_CAPABILITY, input: { body: { input: 'something else' } }, idempotency_key: key });
    expect(other.error?.code).toBe(`${PREFIX}idempotency_conflict`);
    expect(runRequests(h)).toHaveLength(0);
    await inspector.close();
  });

  it('a process killed mid-start on an endpoint declaring durable run idempotency: the replay asks Hermes again and learns the one run', {
    timeout: 60_000,
  }, async () => {
    const store = await backend.create();
    const h = await harness({ simulator: { profile: 'v0.22' }, connector: { ledger: store.open(), idempotencyLeaseMs: 300 } });
    // The child's start reaches this Hermes, which starts the run; its answer never reaches the child.
    const proxy = await startRecordingProxy(h.sim.url);
    cleanups.push(() => proxy.close());
    proxy.loseNextStartAnswer('hold');
    const key = nextId('key');
    const body = { input: 'crash me after Hermes accepted', sim_script: script.quick() };
    const childAction = { id: nextId('act_child'), capability_id: START_CAPABILITY, input: { body }, idempotency_key: key };
    const child = spawnChild({ ...store.env, ENDPOINT_ID: ENDPOINT, BASE_URL: proxy.url, API_KEY, LEASE_MS: '300', ACTION: JSON.stringify(childAction) });
    const accepted = await eventually(() => {
      const exited = child.exited();
      if (exited) throw new Error(`the child exited early (${JSON.stringify(exited)}): ${child.output()}`);
      return proxy.startAnswers[0];
    }, "Hermes to answer the child's start");
    child.process.kill('SIGKILL');
    await child.exit;
    const runId = (JSON.parse(accepted) as { run_id: string }).run_id;

    const replay = await h.invoke({ capability_id: START_CAPABILITY, input: { body }, idempotency_key: key });
    expect(replay.status, JSON.stringify(replay.error)).toBe('completed');
    expect(replay.output).toMatchObject({ run_id: runId, replayed: true });
    expect(replay.receipt).toMatchObject({ replayed: true, replayed_by: 'provider' });
    expect(h.sim.startCount()).toBe(1);
    expect(await h.connector.evidence(replay.action_id)).toMatchObject({ run_id: runId, learned_from: 'provider_replay' });
    // Settled with the run: a later replay is answered from the ledger, and Hermes is not asked again.
    const inspector = store.open();
    expect(await inspector.get({ capability_id: START_CAPABILITY, idempotency_key: key }, Date.now())).toMatchObject({ state: 'done', lease_owner: null });
    const again = await h.invoke({ capability_id: START_CAPABILITY, input: { body }, idempotency_key: key });
    expect(again.receipt).toMatchObject({ replayed: true, replayed_by: 'connector', original_action_id: childAction.id });
    expect(again.output).toMatchObject({ run_id: runId });
    // The child's start and the one ask again; the later replay sent nothing.
    expect(runRequests(h).filter((request) => request.method === 'POST')).toHaveLength(2);
    await inspector.close();
  });

  it('a restart reconciles the bindings kept in the store', async () => {
    const store = await backend.create();
    const clock = { t: Date.now() };
    const ledgerA = store.open();
    const h = await harness({ connector: { ledger: ledgerA, now: () => clock.t } });
    const start = async (connector: HermesConnector, body: Record<string, unknown>): Promise<AipActionResult> => {
      const result = await connector.invoke({ id: nextId(), capability_id: START_CAPABILITY, input: { body }, idempotency_key: nextId('key') });
      expect(result.status, JSON.stringify(result.error)).toBe('completed');
      return result;
    };
    const runIdOf = (result: AipActionResult) => (result.output as { run_id: string }).run_id;

    clock.t += 1000;
    const long = await start(h.connector, { input: 'long', sim_script: script.long() });
    clock.t += 1000;
    const quick = await start(h.connector, { input: 'quick', session_id: 'quick-session', sim_script: script.quick() });
    clock.t += 1000;
    const read = await h.connector.invoke({ id: nextId(), capability_id: `cap:hermes_agent:${ENDPOINT}:run_events`, input: { run_id: runIdOf(quick) } });
    expect(read.status).toBe('completed');
    await eventually(() => h.sim.run(runIdOf(long))?.status === 'running' || undefined, 'the long run to be running');
    const longBefore = (await h.connector.evidence(long.action_id)) as RunEvidence;
    const quickBefore = (await h.connector.evidence(quick.action_id)) as RunEvidence;
    expect(longBefore).toMatchObject({ run_id: runIdOf(long), last_status: 'started', evidence_lost: false });
    expect(quickBefore).toMatchObject({ run_id: runIdOf(quick), session_id: 'quick-session', last_status: 'completed', terminal_event: 'run.completed' });

    // Process A ends.
    await h.connector.close();
    await ledgerA.close();

    // Process B: a new ledger over the same store.
    const b = createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: h.sim.url, apiKey: API_KEY }], ledger: store.open(), now: () => clock.t });
    cleanups.push(() => b.close());
    expect(await b.evidence(long.action_id)).toEqual(longBefore);
    expect(await b.evidence(runIdOf(long))).toEqual(longBefore);
    expect(await b.evidence(quick.action_id)).toEqual(quickBefore);
    expect(await b.evidence(runIdOf(quick))).toEqual(quickBefore);

    const firstAt = (clock.t += 1000);
    let before = h.sim.requests.length;
    const first = await b.reconcile();
    expect(h.sim.requests.slice(before).map((request) => `${request.method} ${request.path}`)).toEqual([`GET /v1/runs/${runIdOf(long)}`]);
    const running = { ...longBefore, updated_at: firstAt, last_status: 'running' };
    expect(first).toEqual([running]);

    // Hermes restarts too (pin: it forgets every run).
    h.sim.restart();
    await eventually(
      async () =>
        (await b.invoke({ id: nextId(), capability_id: `cap:hermes_agent:${ENDPOINT}:run_status`, input: { run_id: UNKNOWN_RUN } })).error?.code ===
          `${PREFIX}not_found` || undefined,
      'the simulator to answer after its restart',
    );
    const lostAt = (clock.t += 1000);
    before = h.sim.requests.length;
    const second = await b.reconcile();
    expect(h.sim.requests.slice(before).map((request) => `${request.method} ${request.path}`)).toEqual([`GET /v1/runs/${runIdOf(long)}`]);
    const lost = { ...running, updated_at: lostAt, evidence_lost: true };
    expect(second).toEqual([lost]);
    expect(second[0]?.last_status).toBe('running');

    // And that verdict is durable too.
    const c = store.open();
    expect(await c.evidence(long.action_id)).toEqual(lost);
    expect(await c.evidence(quick.action_id)).toEqual(quickBefore);
    expect(await c.openRuns()).toEqual([]);
  });
});
