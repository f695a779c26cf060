/**
 * Hermes answered, and only the ledger's write of the outcome failed: the caller still gets what
 * Hermes answered (with its run id), the receipt says the write failed, and the connector keeps
 * trying to write it while its claim is held, so a replay waits and then replays that answer; it never
 * starts a second run. If the connector goes away first, the claim's lease runs out and replays answer
 * `outcome_unknown`.
 */
import { describe, expect, it } from 'vitest';
import { createHermesConnector, type AipActionResult, type RunLedger } from 'aip-connector-hermes-agent';
import { API_KEY, ENDPOINT, checkedConnector, eventually, harnessFactory, nextId, script } from '../helpers/harness.js';
import { captureLogger } from '../helpers/capture-logger.js';
import { LEDGER_BACKENDS, DURABLE_BACKENDS } from '../helpers/ledgers.js';

const PREFIX = 'connector.hermes_agent.';
const harness = harnessFactory();

/** The ledger, with its outcome writes (`settle`) failing while `failing` is set. */
function failingSettles(ledger: RunLedger): { ledger: RunLedger; failing: { on: boolean }; failures: () => number } {
  const failing = { on: true };
  let failures = 0;
  const proxy = new Proxy(ledger, {
    get(target, property) {
      if (property === 'settle') {
        return async (...args: Parameters<RunLedger['settle']>) => {
          if (failing.on) {
            failures++;
            throw new Error('simulated ledger write failure');
          }
          return target.settle(...args);
        };
      }
      const value: unknown = Reflect.get(target, property);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { ledger: proxy, failing, failures: () => failures };
}

const runIdOf = (result: AipActionResult) => (result.output as { run_id: string }).run_id;

describe.each(LEDGER_BACKENDS)('the outcome write fails after Hermes answered: $name ledger', (backend) => {
  it('the caller gets the run id and a receipt saying so; a replay waits for the late write, then replays the run', async () => {
    const store = await backend.create();
    const { ledger, failing, failures } = failingSettles(store.ledger);
    const { logger, lines } = captureLogger();
    const h = await harness({ connector: { ledger, logger } });
    const action = { capability_id: h.cap('run_start'), input: { body: { input: 'hi', sim_script: script.long() } }, idempotency_key: nextId('key') };

    const first = await h.invoke(action);
    expect(first.status, JSON.stringify(first.error)).toBe('completed');
    expect(h.sim.run(runIdOf(first))).toBeDefined();
    expect(first.receipt?.ledger).toBe('write_failed');
    expect(lines.some((line) => line.msg === 'run ledger failed' && line.stage === 'store outcome')).toBe(true);

    // While the write keeps failing, a replay waits for it (within its own deadline) and never starts a run.
    await eventually(() => failures() >= 2 || undefined, 'the write is tried again');
    const waiting = await h.invoke(action, { deadline: Date.now() + 300 });
    expect(waiting.error?.code).toBe(`${PREFIX}deadline_exceeded`);
    expect(waiting.error?.details?.uncertain_outcome).toBe(true);

    failing.on = false;
    const replay = await eventually(async () => {
      const answer = await h.invoke(action, { deadline: Date.now() + 1000 });
      return answer.status === 'completed' ? answer : undefined;
    }, 'a replay of the late-written outcome');
    expect(replay.receipt?.replayed).toBe(true);
    expect(replay.receipt?.ledger).toBeUndefined();
    expect(runIdOf(replay)).toBe(runIdOf(first));
    expect(await h.connector.evidence(first.action_id)).toMatchObject({ run_id: runIdOf(first) });
    expect(h.sim.startCount()).toBe(1);
    expect(lines.some((line) => line.msg === 'run ledger write succeeded late' && line.write === 'outcome')).toBe(true);
  });
});

describe.each(DURABLE_BACKENDS)('the connector closes before the late write succeeds: $name ledger', (backend) => {
  it("another connector's replay, once the lease ran out, answers outcome_unknown and sends nothing", async () => {
    const store = await backend.create();
    const { ledger } = failingSettles(store.ledger);
    const h = await harness({ connector: { ledger, idempotencyLeaseMs: 200 } });
    const action = { capability_id: h.cap('run_start'), input: { body: { input: 'hi', sim_script: script.long() } }, idempotency_key: nextId('key') };
    const first = await h.invoke(action);
    expect(first.receipt?.ledger).toBe('write_failed');
    await h.connector.close();

    const later = checkedConnector(createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: h.sim.url, apiKey: API_KEY }], ledger: store.open() }));
    try {
      const replay = await later.invoke(action, { deadline: Date.now() + 5000 });
      expect(replay.error?.code).toBe(`${PREFIX}outcome_unknown`);
      expect(replay.error?.details?.uncertain_outcome).toBe(true);
      expect(h.sim.startCount()).toBe(1);
    } finally {
      await later.connector.close();
    }
  });
});

/** The ledger, with the answer of its next claim lost after the claim was stored (a connection ended after the commit). */
function losingClaimAnswer(ledger: RunLedger): RunLedger {
  let lose = true;
  return new Proxy(ledger, {
    get(target, property) {
      if (property === 'claim') {
        return async (...args: Parameters<RunLedger['claim']>) => {
          const claimed = await target.claim(...args);
          if (!lose) return claimed;
          lose = false;
          throw new Error('simulated connection ended after the commit');
        };
      }
      const value: unknown = Reflect.get(target, property);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

describe.each(LEDGER_BACKENDS)('a claim stored whose answer was lost: $name ledger', (backend) => {
  it('answers ledger_unavailable with nothing sent; a retry of the key starts the run instead of waiting for a claim nobody holds', async () => {
    const store = await backend.create();
    const { logger, lines } = captureLogger();
    const h = await harness({ connector: { ledger: losingClaimAnswer(store.ledger), logger } });
    const action = { capability_id: h.cap('run_start'), input: { body: { input: 'hi', sim_script: script.long() } }, idempotency_key: nextId('key') };
    const refused = await h.invoke(action);
    expect(refused.error?.code).toBe(`${PREFIX}ledger_unavailable`);
    expect(h.sim.startCount()).toBe(0);
    const retry = await h.invoke(action, { deadline: Date.now() + 5000 });
    expect(retry.status, JSON.stringify(retry.error)).toBe('completed');
    expect(retry.receipt?.replayed).toBeUndefined();
    expect(h.sim.startCount()).toBe(1);
    expect(lines.some((line) => line.msg === 'run ledger write succeeded late' && line.write === 'claim release')).toBe(true);
  });
});
