/**
 * Identifiers a ledger cannot store exactly (a lone surrogate, which SQLite and PostgreSQL turn into
 * U+FFFD; a NUL, which PostgreSQL text refuses) are refused up front with `invalid_input`, the same on
 * every backend: nothing is written and nothing is sent. A Hermes answer naming such a run is not
 * recorded as a run either.
 */
import { describe, expect, it } from 'vitest';
import { createHermesConnector, type AipAction, type ExecutionContext, type RunLedger } from 'aip-connector-hermes-agent';
import { API_KEY, ENDPOINT, checkedConnector, grantFor, harnessFactory, nextId, script } from '../helpers/harness.js';
import { LEDGER_BACKENDS } from '../helpers/ledgers.js';
import { respondJson, startFaultServer } from '../helpers/fault-server.js';

const PREFIX = 'connector.hermes_agent.';
const LONE_SURROGATE = '\ud800';
const NUL = '\u0000';
const UNSTORABLE = [
  ['a lone surrogate', LONE_SURROGATE],
  ['a NUL', NUL],
] as const;

const harness = harnessFactory();

const startAction = ({ cap }: { cap(operation: string): string }, overrides: Partial<AipAction> = {}): AipAction => ({
  id: nextId(),
  capability_id: cap('run_start'),
  input: { body: { input: 'hi', sim_script: script.long() } },
  idempotency_key: nextId('key'),
  ...overrides,
});

/** The ledger, with the name of every method called on it, in order. */
function recording(ledger: RunLedger): { ledger: RunLedger; calls: string[] } {
  const calls: string[] = [];
  const proxy = new Proxy(ledger, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        calls.push(String(property));
        return (value as (...args: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { ledger: proxy, calls };
}

describe.each(LEDGER_BACKENDS)('identifiers a ledger cannot store: $name ledger', (backend) => {
  const withLedger = async () => {
    const { ledger, calls } = recording((await backend.create()).ledger);
    return { h: await harness({ connector: { ledger } }), ledger, calls };
  };

  describe.each(UNSTORABLE)('%s', (_, bad) => {
    it('in the action id: invalid_input, nothing written, nothing sent; evidence() is null and cancel() refuses the same way', async () => {
      const { h, ledger, calls } = await withLedger();
      const action = startAction(h, { id: `act_${bad}_1` });
      const result = await h.invoke(action);
      expect(result.error?.code).toBe(`${PREFIX}invalid_input`);
      expect(result.error?.message).toMatch(/action id/);
      expect(h.sim.startCount()).toBe(0);
      expect(calls).toEqual([]);
      expect(await ledger.get({ capability_id: h.cap('run_start'), idempotency_key: action.idempotency_key as string }, Date.now())).toBeUndefined();
      expect(await h.connector.evidence(action.id)).toBeNull();
      expect(await h.connector.evidence(action.id, { tenantId: null })).toBeNull();
      const cancelled = await h.cancel(action);
      expect(cancelled?.error?.code).toBe(`${PREFIX}invalid_input`);
      expect(h.sim.requests).toHaveLength(0);
    });

    it('in the tenant id, the session id or an approval id: invalid_input before any ledger write or provider call', async () => {
      const { h, calls } = await withLedger();
      for (const context of [{ tenantId: `tenant_${bad}` }, { sessionId: `sess_${bad}` }] satisfies ExecutionContext[]) {
        const result = await h.invoke(startAction(h), context);
        expect(result.error?.code, JSON.stringify(context)).toBe(`${PREFIX}invalid_input`);
        expect(result.error?.message).toMatch(Object.keys(context)[0] as string);
      }
      const session = await h.invoke(startAction(h, { input: { body: { input: 'hi', session_id: `sess_${bad}` } } }));
      expect(session.error?.code).toBe(`${PREFIX}invalid_input`);
      const stop = { capability_id: h.cap('run_stop'), input: { run_id: 'run_1' }, idempotency_key: nextId('key') };
      const refused = await h.invoke(stop, { approval: grantFor(stop.input, { approvalId: `appr_${bad}` }) });
      expect(refused.error?.code).toBe(`${PREFIX}invalid_input`);
      expect(refused.error?.message).toMatch(/approvalId/);
      expect(calls).toEqual([]);
      expect(h.sim.requests).toHaveLength(0);
    });

    it('in the run id of a Hermes 202: not recorded as a run; the outcome is uncertain and its replay answers the same', async () => {
      const store = await backend.create();
      const hermes = await startFaultServer(respondJson(202, { run_id: `run_${bad}_9`, status: 'queued' }));
      const connector = checkedConnector(createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: hermes.url, apiKey: API_KEY }], ledger: store.ledger }));
      try {
        const action = startAction(connector);
        const first = await connector.invoke(action);
        expect(first.status).toBe('failed');
        expect(first.error?.code).toBe(`${PREFIX}invalid_response`);
        expect(first.error?.details?.uncertain_outcome).toBe(true);
        expect(await store.ledger.openRuns()).toEqual([]);
        const replay = await connector.invoke({ ...action, id: nextId() });
        expect(replay.error?.code).toBe(`${PREFIX}invalid_response`);
        expect(replay.receipt?.replayed).toBe(true);
        expect(hermes.requests).toHaveLength(1);
        // The ledger still works for everything else.
        const other = await connector.invoke({ ...action, id: nextId(), idempotency_key: nextId('key') });
        expect(other.error?.code).toBe(`${PREFIX}invalid_response`);
        expect(hermes.requests).toHaveLength(2);
      } finally {
        await connector.connector.close();
        await hermes.close();
      }
    });
  });

  it('evidence() of an id no ledger could hold answers null on every backend', async () => {
    const { h } = await withLedger();
    for (const [, bad] of UNSTORABLE) {
      expect(await h.connector.evidence(`act_${bad}`)).toBeNull();
      expect(await h.connector.evidence(`act_${bad}`, { tenantId: 'tenant-a' })).toBeNull();
    }
  });
});
