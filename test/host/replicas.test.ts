/**
 * Two replicas (two replica ids, two host processes) on one PostgreSQL ledger behind one
 * runtime: a run_start sent to replica 1 starts its Hermes run, the runtime's request times
 * out before the answer, and the central side retries the same action to replica 2. Hermes
 * must see one run, not two, and both replicas must then tell the same story about it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  closeDeployments,
  hermesOf,
  runAction,
  runStartAction,
  startRuntime,
  startSimulator,
  waitForReady,
} from '../helpers/aip-runtime/deployment-fixture.js';
import type { AipRuntime } from '../helpers/aip-runtime/runtime.js';
import type { HostTarget, Outcome } from '../helpers/aip-runtime/dispatcher.js';
import { expectSignedResult } from '../helpers/aip-runtime/expectations.js';
import { startHermesGate, type HermesGate } from '../helpers/aip-runtime/hermes-gate.js';
import { launchHost } from '../helpers/aip-runtime/launcher.js';
import { createPgSchemaOn, type PgSchema } from '../helpers/pg-schema.js';

const PG_URL = process.env['HERMES_TEST_PG_URL'];
/** Retries of the central side to replica 2 while replica 1 still holds the action (a bound, not a timing). */
const RETRIES = 40;

describe.skipIf(!PG_URL)('replicas on one PostgreSQL ledger', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await closeDeployments();
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  async function twoReplicas(): Promise<{
    runtime: AipRuntime;
    gate: HermesGate;
    one: HostTarget;
    two: HostTarget;
    simulator: Awaited<ReturnType<typeof startSimulator>>;
  }> {
    const schema: PgSchema = await createPgSchemaOn(PG_URL!, 'host_replicas');
    cleanups.push(schema.drop);
    const simulator = await startSimulator();
    const gate = await startHermesGate(simulator.url);
    cleanups.push(gate.close);
    const runtime = await startRuntime();
    const ledger = { kind: 'postgres', connectionString: schema.connectionString } as const;
    const [first, second] = await Promise.all([
      launchHost({ runtime, hermes: { ...hermesOf(simulator), url: gate.url }, replica: 1, ledger }),
      launchHost({ runtime, hermes: hermesOf(simulator), replica: 2, ledger }),
    ]);
    await Promise.all([waitForReady(first, 200), waitForReady(second, 200)]);
    return { runtime, gate, one: first.target, two: second.target, simulator };
  }

  /** The central side's retries of one action to a replica: a new envelope each time, until an action_result. */
  async function retryUntilResult(runtime: AipRuntime, target: HostTarget, action: ReturnType<typeof runStartAction>): Promise<Outcome> {
    let outcome: Outcome | undefined;
    for (let attempt = 0; attempt < RETRIES; attempt++) {
      outcome = await runtime.dispatcher.invoke(target, action);
      if (outcome.verdict.actionResult?.status === 'completed') return outcome;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return outcome!;
  }

  it('a run_start retried to replica 2 after replica 1 timed out starts one Hermes run; both replicas report that run', async () => {
    const { runtime, gate, one, two, simulator } = await twoReplicas();
    const action = runStartAction({ input: 'only once, please' });
    gate.holdStarts = true;
    const held = gate.nextHeld();
    const gaveUp = new AbortController();
    const firstTry = runtime.dispatcher.invoke(one, action, { signal: gaveUp.signal, retryBudget: 0 });
    await held;
    expect(simulator.startCount()).toBe(1);
    gaveUp.abort(new Error('the runtime request timed out'));
    expect((await firstTry).exchange.transportError).toBeDefined();
    gate.release();

    const retried = await retryUntilResult(runtime, two, action);
    const result = expectSignedResult(retried);
    expect(result.status).toBe('completed');
    expect(simulator.startCount()).toBe(1);
    const runId = simulator.runs()[0]!.run_id;
    expect((result.output as any).run_id).toBe(runId);

    const again = expectSignedResult(await retryUntilResult(runtime, one, action));
    expect((again.output as any).run_id).toBe(runId);
    expect(simulator.startCount()).toBe(1);
    for (const target of [one, two]) {
      const status = expectSignedResult(await runtime.dispatcher.invoke(target, runAction('run_status', runId)));
      expect((status.output as any).run_id).toBe(runId);
    }
  });
});
