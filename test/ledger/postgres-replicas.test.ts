/**
 * Two connector replicas sharing one PostgreSQL ledger (each with its own pool, as two
 * processes would have) fire the same run_start at the same moment: exactly one run reaches
 * Hermes and both callers get the same result. Runs only when HERMES_TEST_PG_URL is set
 * (test/helpers/ledgers.ts says loudly when it is not; CI always sets it).
 */
import { describe, expect, it } from 'vitest';
import { createHermesConnector, type AipActionResult, type HermesConnector } from 'aip-connector-hermes-agent';
import { API_KEY, ENDPOINT, harnessFactory, nextId, script, type Harness } from '../helpers/harness.js';
import { LEDGER_BACKENDS, PG_URL } from '../helpers/ledgers.js';
import { gateSettlesUntilInFlightSeen } from '../helpers/ledger-gate.js';

const harness = harnessFactory({ simulator: { streamLookupMs: 100 } });
const postgres = LEDGER_BACKENDS.find((backend) => backend.name === 'postgres');

const startPosts = (h: Harness) => h.sim.requests.filter((request) => request.method === 'POST' && request.path === '/v1/runs');
const runIdOf = (result: AipActionResult) => (result.output as { run_id: string }).run_id;

describe.skipIf(!PG_URL)('two connector replicas on one PostgreSQL ledger', () => {
  /** Replica A is the harness connector; replica B another connector with its own ledger (own pool) over the same schema. */
  const replicas = async (gated: boolean) => {
    const store = await postgres!.create();
    const own = [store.open(), store.open()];
    const gate = gated ? gateSettlesUntilInFlightSeen(own) : undefined;
    const [ledgerA, ledgerB] = gate ? gate.ledgers : own;
    const h = await harness({ connector: { ledger: ledgerA! } });
    const b: HermesConnector = createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: h.sim.url, apiKey: API_KEY }], ledger: ledgerB! });
    return { h, a: h.connector, b, gate };
  };

  const startBoth = async (a: HermesConnector, b: HermesConnector, h: Harness) => {
    const key = nextId('key');
    const body = { input: 'one run for both', sim_script: script.long() };
    const action = () => ({ id: nextId(), capability_id: h.cap('run_start'), input: { body: structuredClone(body) }, idempotency_key: key });
    return Promise.all([a.invoke(action()), b.invoke(action())]);
  };

  const expectOneRunForBoth = (h: Harness, results: AipActionResult[]) => {
    expect(startPosts(h)).toHaveLength(1);
    expect(h.sim.startCount()).toBe(1);
    for (const result of results) expect(result.status, JSON.stringify(result.error)).toBe('completed');
    expect(runIdOf(results[0]!)).toBe(runIdOf(results[1]!));
    const replayed = results.filter((result) => result.receipt?.replayed === true);
    expect(replayed).toHaveLength(1);
    const original = results.find((result) => result.receipt?.replayed !== true)!;
    expect(replayed[0]).toEqual({
      ...original,
      action_id: replayed[0]!.action_id,
      receipt: { ...original.receipt, replayed: true, replayed_by: 'connector', original_action_id: original.action_id },
    });
  };

  it('the same run_start from both at the same moment: one POST /v1/runs, the same result for both, one marked replayed', async () => {
    const { h, a, b } = await replicas(false);
    try {
      expectOneRunForBoth(h, await startBoth(a, b, h));
    } finally {
      await b.close();
    }
  });

  it('the same, with the first replica held in flight until the other has seen its claim (the waiting path for certain)', async () => {
    const { h, a, b, gate } = await replicas(true);
    try {
      const results = await startBoth(a, b, h);
      expect(gate!.inFlightSeen()).toBeGreaterThanOrEqual(1);
      expectOneRunForBoth(h, results);
      // The binding is visible to both replicas.
      const runId = runIdOf(results[0]!);
      const seenByA = await a.evidence(runId);
      expect(seenByA).not.toBeNull();
      expect(await b.evidence(runId)).toEqual(seenByA);
    } finally {
      await b.close();
    }
  });
});
