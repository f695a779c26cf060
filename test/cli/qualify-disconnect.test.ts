/**
 * Check 7 judges a reconnect by what the endpoint's stream declares. Where Hermes numbers and
 * replays its events (the v0.22 simulator), the consumer resumes after the last `seq` it got and must
 * get exactly the events it missed: a connector that ignores the cursor (so the backlog comes again
 * from the start) or skips an event fails. Where it does not (the pin), a connector that repeats an
 * event the cut stream delivered fails as before.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startHermesSimulator, type SimulatorProfile } from 'aip-connector-hermes-agent/simulator';
import { createHermesConnector, createMemoryLedger, type HermesConnector, type RunEventsOutput } from '../../src/index.js';
import { disconnectReconciled } from '../../src/cli/qualify/disconnect-reconciled.js';
import { EndpointSession } from '../../src/cli/qualify/session.js';
import { simulatorQualifySettings } from './qualify-helpers.js';

const KEY = 'hk_check7_test_key_5e6f7a8b9c';
const open: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  for (const item of open.splice(0).reverse()) await item.close();
});

/** The real connector, with its run_events calls rewritten by `rewrite`. */
function brokenConnector(inner: HermesConnector, rewrite: (input: Record<string, unknown>) => Record<string, unknown>): HermesConnector {
  return {
    ...inner,
    invoke: (action, context) =>
      action.capability_id.endsWith(':run_events')
        ? inner.invoke({ ...action, input: rewrite(action.input as Record<string, unknown>) }, context)
        : inner.invoke(action, context),
  };
}

/** A connector that answers every later read of a run with the events an earlier read of it delivered, again (a cache replayed). */
function repeatingConnector(inner: HermesConnector): HermesConnector {
  const seen = new Map<string, RunEventsOutput['events']>();
  return {
    ...inner,
    async invoke(action, context) {
      const result = await inner.invoke(action, context);
      if (!action.capability_id.endsWith(':run_events')) return result;
      const runId = (action.input as { run_id: string }).run_id;
      const output = result.output as RunEventsOutput | undefined;
      const earlier = seen.get(runId);
      if (!earlier) seen.set(runId, output?.events ?? []);
      return earlier ? { ...result, output: { ...output, events: [...earlier, ...(output?.events ?? [])] } } : result;
    },
  };
}

async function check7(profile: SimulatorProfile, wrap: (connector: HermesConnector) => HermesConnector = (connector) => connector) {
  const sim = await startHermesSimulator({ apiKey: KEY, profile, keepaliveMs: 200, streamLookupMs: 200 });
  open.push(sim);
  const ledger = createMemoryLedger();
  open.push(ledger);
  const inner = createHermesConnector({ endpoints: [{ id: 'local', baseUrl: sim.url, apiKey: KEY }], ledger });
  open.push(inner);
  const settings = simulatorQualifySettings();
  const session = new EndpointSession({ id: 'local', baseUrl: sim.url, apiKey: KEY }, wrap(inner), ledger, settings, new Set());
  session.deadline = Date.now() + settings.stepTimeoutMs;
  session.checkId = 'disconnect_reconciled';
  const evidence: Record<string, unknown> = {};
  const run = disconnectReconciled.run(session, evidence);
  return { run, evidence, sim };
}

describe('check 7 where Hermes numbers and replays its events (v0.22)', { timeout: 30_000 }, () => {
  it('passes when the reconnect after the last seq delivers exactly the missed events, and records the replay rule', async () => {
    const { run, evidence, sim } = await check7('v0.22');
    await run;
    expect(evidence['rule']).toMatchObject({ applied: 'replay' });
    const resumed = evidence['resumed'] as { last_seq: number; seqs: number[] };
    expect(resumed.seqs.length).toBeGreaterThan(0);
    expect(resumed.seqs).toEqual(resumed.seqs.map((_, index) => resumed.last_seq + 1 + index));
    const request = sim.requests.filter((each) => each.path.endsWith('/events')).at(-1);
    expect(request?.headers['last-event-id']).toBe(String(resumed.last_seq));
  });

  it('fails for a connector that ignores the cursor: the backlog comes again from the start', async () => {
    const { run } = await check7('v0.22', (inner) => brokenConnector(inner, ({ last_seq: _ignored, ...input }) => input));
    await expect(run).rejects.toThrow(/resuming run run_\w+ after seq \d+: it delivered again an event the cut stream had delivered/);
  });

  it('fails for a connector that skips the first event after the cursor', async () => {
    const { run } = await check7('v0.22', (inner) =>
      brokenConnector(inner, (input) => (typeof input['last_seq'] === 'number' ? { ...input, last_seq: input['last_seq'] + 1 } : input)),
    );
    await expect(run).rejects.toThrow(/dropped without events_lost/);
  });
});

describe('check 7 where Hermes does not replay (the pin)', { timeout: 30_000 }, () => {
  it('passes with not_found on a second subscription, and records the no-replay rule', async () => {
    const { run, evidence } = await check7('pin');
    await run;
    expect(evidence['rule']).toMatchObject({ applied: 'no_replay' });
    expect(evidence).not.toHaveProperty('resumed');
  });

  it('fails for a connector that repeats the events the cut stream delivered', async () => {
    const { run } = await check7('pin', repeatingConnector);
    await expect(run).rejects.toThrow(/received 1 event\(s\) the cut stream had already delivered/);
  });
});
