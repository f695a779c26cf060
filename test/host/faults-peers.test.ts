/**
 * Faulty peers: a control plane that is down, unavailable, answers garbage or unsigned
 * bodies (the host loses its lease, is not ready, never crashes, and recovers by itself), a
 * callback target that is slow, refuses or is down (chunks never reordered or dropped while
 * it accepts them; the final result is still answered), and replays after a host restart on
 * the same ledger.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ControlMode } from '../helpers/aip-runtime/control-plane.js';
import { replicaId } from '../helpers/aip-runtime/deployment.js';
import {
  closeDeployments,
  getJson,
  HERMES_KEY,
  hermesOf,
  runAction,
  runStartAction,
  startDeployment,
  waitForReady,
  type Deployment,
} from '../helpers/aip-runtime/deployment-fixture.js';
import type { StreamChunk } from '../helpers/aip-runtime/callback-ingress.js';
import { expectSignedError, expectSignedResult, startRunThroughHost } from '../helpers/aip-runtime/expectations.js';
import { launchHost } from '../helpers/aip-runtime/launcher.js';
import { createPgSchemaOn } from '../helpers/pg-schema.js';
import { waitUntil } from './host-process.js';

const HEARTBEAT_MS = 500;
const LEASE_TTL_MS = 2_000;
const STREAM_TIMEOUT_MS = 60_000;

async function expectAlive(deployment: Deployment): Promise<void> {
  expect(deployment.host.child.exitCode, deployment.host.stderr()).toBeNull();
  expect((await getJson(`${deployment.host.origin}/health`)).status).toBe(200);
  expect(deployment.host.stderr()).not.toMatch(/uncaught|unhandled|FATAL ERROR/i);
}

describe('a faulty control plane', () => {
  let deployment: Deployment;
  let runId: string;

  beforeAll(async () => {
    deployment = await startDeployment({ leaseTtlMs: LEASE_TTL_MS, settings: { HEARTBEAT_MS: String(HEARTBEAT_MS) } });
    runId = await startRunThroughHost(deployment);
  });
  afterAll(closeDeployments);

  it.each<ControlMode>(['down', 'garbage', 'unsigned', 'unavailable'])(
    '%s: the lease lapses, actions are refused 503, then the host recovers by itself',
    async (mode) => {
      const { control } = deployment.runtime;
      control.mode = mode;
      const lapsed = await waitForReady(deployment.host, 503, LEASE_TTL_MS + 5_000);
      expect(lapsed.lease_valid).toBe(false);
      expectSignedError(
        await deployment.runtime.dispatcher.invoke(deployment.host.target, runAction('run_status', runId)),
        503,
        'connector_host.not_ready',
        'temporary',
        true,
      );
      await expectAlive(deployment);
      control.mode = 'grant';
      await waitForReady(deployment.host, 200);
      expect(control.lease(replicaId(1))?.status).toBe('ready');
      expectSignedResult(await deployment.runtime.dispatcher.invoke(deployment.host.target, runAction('run_status', runId)));
    },
  );
});

describe('a faulty callback target', () => {
  let deployment: Deployment;

  beforeAll(async () => {
    deployment = await startDeployment();
  });
  afterAll(closeDeployments);
  afterEach(() => {
    deployment.runtime.ingress.mode = 'accept';
  });

  async function streamedRun(deltas: number): Promise<string> {
    const script = [...Array.from({ length: deltas }, (_, i) => ({ type: 'delta', text: `d${i} ` })), { type: 'complete', output: 'done' }];
    return startRunThroughHost(deployment, { input: 'stream', sim_script: script });
  }

  function streamAction(runId: string) {
    return runAction('run_events', runId, { mode: 'streaming' });
  }

  /** Accepted sequences form one contiguous increasing run that ends with the final chunk. */
  function expectContiguousTail(chunks: StreamChunk[]): void {
    expect(chunks.length).toBeGreaterThan(0);
    const sequences = chunks.map((chunk) => chunk.sequence);
    expect(sequences).toEqual(Array.from({ length: sequences.length }, (_, i) => sequences[0]! + i));
    expect(['done', 'error']).toContain(chunks.at(-1)!.kind);
  }

  it('slow: every chunk arrives, in order, and the final result is answered', async () => {
    const runId = await streamedRun(12);
    deployment.runtime.ingress.mode = 'slow';
    deployment.runtime.ingress.slowMs = 150;
    const action = streamAction(runId);
    expect(expectSignedResult(await deployment.runtime.dispatcher.invoke(deployment.host.target, action, { timeoutMs: STREAM_TIMEOUT_MS })).status).toBe(
      'completed',
    );
    const chunks = deployment.runtime.ingress.accepted(action.id);
    expect(chunks.map((chunk) => chunk.sequence)).toEqual(Array.from({ length: chunks.length }, (_, i) => i));
    expect(chunks.filter((chunk) => chunk.kind === 'data').length).toBe(12);
    await expectAlive(deployment);
  });

  it('refusing, then accepting: nothing accepted is reordered or lost after it accepts again, and the result is answered', async () => {
    const runId = await streamedRun(8);
    const { ingress } = deployment.runtime;
    ingress.mode = 'refuse';
    const action = streamAction(runId);
    const pending = deployment.runtime.dispatcher.invoke(deployment.host.target, action, { timeoutMs: STREAM_TIMEOUT_MS });
    let refusals = 0;
    await ingress.waitFor((record) => record.chunk?.action_id === action.id && record.status === 503 && ++refusals >= 2, 'two refused deliveries');
    ingress.mode = 'accept';
    expect(expectSignedResult(await pending).action_id).toBe(action.id);
    expectContiguousTail(ingress.accepted(action.id));
    await expectAlive(deployment);
  });

  it('a runtime that stopped waiting for the POST refuses the chunks that follow (ingest_assigned_connector_stream_chunk): the host stops delivering at the first refusal, finishes the run and survives', async () => {
    const script = [
      { type: 'delta', text: 'before ' },
      { type: 'approval', command: 'rm -rf ./gave-up' },
      { type: 'tool', tool: 'terminal' },
      { type: 'delta', text: 'after' },
      { type: 'complete', output: 'done' },
    ];
    const runId = await startRunThroughHost(deployment, { input: 'stream', sim_script: script });
    const { ingress } = deployment.runtime;
    const action = streamAction(runId);
    const gaveUp = new AbortController();
    const pending = deployment.runtime.dispatcher.invoke(deployment.host.target, action, { signal: gaveUp.signal, retryBudget: 0 });
    await ingress.waitFor(
      (record) => record.accepted && record.chunk?.action_id === action.id && record.chunk.kind === 'pending_approval',
      'the approval chunk',
    );
    gaveUp.abort();
    expect((await pending).exchange.status).toBe(0);
    await answerApproval(runId);
    const finished = () =>
      deployment.host.stderr().includes('stream chunks not delivered to the callback target') ||
      ingress.accepted(action.id).some((chunk) => chunk.kind === 'done');
    await waitUntil(finished, 'the host to finish the run');
    const records = ingress.records.filter((record) => record.chunk?.action_id === action.id);
    const refused = records.filter((record) => !record.accepted);
    expect(refused.map((record) => record.status)).toEqual([401]);
    expect(refused[0]!.problems.join('; ')).toMatch(/no central execution/);
    expect(records.at(-1)).toBe(refused[0]);
    expectContiguousFromZero(ingress.accepted(action.id));
    await expectAlive(deployment);
  });

  async function answerApproval(runId: string): Promise<void> {
    const answer = await fetch(`${deployment.simulator.url}/v1/runs/${runId}/approval`, {
      method: 'POST',
      headers: { authorization: `Bearer ${HERMES_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ choice: 'once' }),
    });
    expect(answer.status).toBe(200);
  }

  function expectContiguousFromZero(chunks: StreamChunk[]): void {
    expect(chunks.map((chunk) => chunk.sequence)).toEqual(Array.from({ length: chunks.length }, (_, i) => i));
  }

  it(
    'down: the final result is still answered and the host survives',
    async () => {
      const runId = await streamedRun(2);
      deployment.runtime.ingress.mode = 'down';
      const action = streamAction(runId);
      const outcome = await deployment.runtime.dispatcher.invoke(deployment.host.target, action, { timeoutMs: STREAM_TIMEOUT_MS });
      expect(expectSignedResult(outcome).action_id).toBe(action.id);
      expect(deployment.runtime.ingress.accepted(action.id)).toEqual([]);
      await expectAlive(deployment);
    },
    STREAM_TIMEOUT_MS + 10_000,
  );
});

const PG_URL = process.env['HERMES_TEST_PG_URL'];

describe.each([
  ['SQLite', false],
  ['PostgreSQL', true],
])('replays after a restart on the same %s ledger', (_name, postgres) => {
  afterAll(closeDeployments);

  it.skipIf(postgres && !PG_URL)('the same signed envelope sent again to the restarted host → 409 connector_host.replay, no second Hermes call', async () => {
    const schema = postgres ? await createPgSchemaOn(PG_URL!, 'host_restart') : undefined;
    try {
      const ledger = schema ? ({ kind: 'postgres', connectionString: schema.connectionString } as const) : undefined;
      const deployment = await startDeployment(ledger ? { ledger } : {});
      const { dispatcher } = deployment.runtime;
      const prepared = dispatcher.prepareAction(deployment.host.target, runStartAction());
      const first = await dispatcher.send(prepared);
      expectSignedResult({ prepared, exchange: first, verdict: dispatcher.verify(prepared, first) });
      deployment.host.kill('SIGTERM');
      expect((await deployment.host.exited).code).toBe(0);

      const restarted = await launchHost({
        runtime: deployment.runtime,
        hermes: hermesOf(deployment.simulator),
        seedHex: deployment.host.seedHex,
        ledger: deployment.host.ledger,
      });
      await waitForReady(restarted, 200);
      const again = { ...prepared, target: restarted.target };
      const second = await dispatcher.send(again);
      expectSignedError({ prepared: again, exchange: second, verdict: dispatcher.verify(again, second) }, 409, 'connector_host.replay', 'policy', false);
      expect(deployment.simulator.startCount()).toBe(1);
    } finally {
      await closeDeployments();
      await schema?.drop();
    }
  });
});
