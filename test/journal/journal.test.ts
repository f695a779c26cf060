/**
 * The run event journal against the simulator over real HTTP, on a real SQLite file and on real
 * PostgreSQL: the connector follows every run it starts, and run_events reads the journal, so any
 * number of readers get every event once, in order, and a follower that dies is taken over.
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import {
  createHermesConnector,
  type AipActionResult,
  type ExecutionContext,
  type JournalOptions,
  type RunEventsOutput,
  type RunLedger,
} from 'aip-connector-hermes-agent';
import type { SimulatorProfile } from 'aip-connector-hermes-agent/simulator';
import { journalStoreOf, type JournalKey, type JournalStore } from '../../src/journal/types.js';
import {
  API_KEY,
  checkedConnector,
  ENDPOINT,
  eventually,
  grantFor,
  harnessFactory,
  nextId,
  script,
  type CheckedConnector,
  type Harness,
} from '../helpers/harness.js';
import { DURABLE_BACKENDS, type LedgerStore } from '../helpers/ledgers.js';

const harness = harnessFactory({ simulator: { streamLookupMs: 100 } });

const output = (result: AipActionResult) => result.output as RunEventsOutput;
const names = (result: AipActionResult) => output(result).events.map((event) => event.event);
const simulatedNames = (h: Harness, runId: string) => (h.sim.run(runId)?.events ?? []).map((event) => event['event']);
const simulatedSeqs = (h: Harness, runId: string) => (h.sim.run(runId)?.events ?? []).map((event) => event['seq'] as number);

/** Deltas, a pause long enough for readers and takeovers to join while the run goes on, then the end. */
const slowScript = (pauseMs = 1500) => [
  { type: 'delta', text: 'one ' },
  { type: 'delta', text: 'two ' },
  { type: 'sleep', ms: pauseMs },
  { type: 'delta', text: 'three' },
  { type: 'complete', output: 'one two three' },
];

const readEvents = (connector: CheckedConnector, runId: string, input: Record<string, unknown> = {}, context?: ExecutionContext) =>
  connector.invoke({ capability_id: connector.cap('run_events'), input: { run_id: runId, ...input } }, context);

describe.each(DURABLE_BACKENDS)('run journal on $name', (backend) => {
  const journaled = async (journal: JournalOptions = {}, profile: SimulatorProfile = 'pin') => {
    const store = await backend.create();
    const h = await harness({ simulator: { profile }, connector: { ledger: store.ledger, journal: { leaseMs: 200, ...journal } } });
    return { h, store };
  };
  const replica = (h: Harness, store: LedgerStore, journal: JournalOptions = { leaseMs: 200 }) =>
    checkedConnector(createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: h.sim.url, apiKey: API_KEY }], ledger: store.open(), journal }));

  it('two subscribers of one run each get every event once, in order, and Hermes sees one subscriber', async () => {
    const { h } = await journaled();
    const runId = await h.startRun({ input: 'two readers', sim_script: slowScript() });
    const [first, second] = await Promise.all([readEvents(h, runId), readEvents(h, runId)]);
    for (const result of [first, second] as AipActionResult[]) {
      expect(result.status, JSON.stringify(result.error)).toBe('completed');
      expect(names(result)).toEqual(simulatedNames(h, runId));
      expect(output(result).text).toBe('one two three');
      expect(output(result).journal).toEqual({ state: 'complete', last_sequence: names(result).length, close_reason: 'run.completed' });
    }
    const streamRequests = h.sim.requests.filter((request) => request.path.endsWith('/events'));
    expect(streamRequests).toHaveLength(1);
    // A third reader after the end still gets the whole run.
    expect(names(await readEvents(h, runId))).toEqual(simulatedNames(h, runId));
  });

  it('a reader cut after some events resumes with after_sequence and misses nothing', async () => {
    const { h } = await journaled();
    const runId = await h.startRun({ input: 'reconnect', sim_script: slowScript() });
    const cut = await readEvents(h, runId, { max_events: 2 });
    expect(cut.error?.code).toBe('connector.hermes_agent.stream_truncated');
    expect(names(cut)).toHaveLength(2);
    const rest = await readEvents(h, runId, { after_sequence: 2 });
    expect(rest.status, JSON.stringify(rest.error)).toBe('completed');
    expect([...names(cut), ...names(rest)]).toEqual(simulatedNames(h, runId));
    expect(h.chunks.get(rest.action_id)?.[0]?.data).toEqual({ hermes_sse: output(rest).events[0] });
  });

  it.each(['later', 'v0.22'] as const)(
    'a follower whose process died is taken over by another replica, which resumes after its last seq (%s): the journal is whole',
    async (profile) => {
      const { h, store } = await journaled({}, profile);
      const runId = await h.startRun({ input: 'takeover', sim_script: slowScript(2500) });
      expect(names(await readEvents(h, runId, { max_events: 1 }))).toHaveLength(1);
      await h.connector.close();
      const b = replica(h, store);
      try {
        const all = await readEvents(b, runId);
        expect(all.status, JSON.stringify(all.error)).toBe('completed');
        expect(names(all)).toEqual(simulatedNames(h, runId));
        expect(output(all).events.map((event) => event.data['seq'])).toEqual(simulatedSeqs(h, runId));
        expect(output(all).journal?.events_lost).toBeUndefined();
        const resumed = h.sim.requests.find((request) => request.rawPath.includes('last_seq='));
        expect(resumed?.headers['last-event-id']).toBe(resumed?.rawPath.split('last_seq=')[1]);
      } finally {
        await b.connector.close();
      }
    },
  );

  it('a takeover that Hermes (v0.22) can no longer replay in full records which seqs were lost, and journals the kept events after them', async () => {
    const store = await backend.create();
    const h = await harness({
      simulator: { profile: 'v0.22', replayRetainedEvents: 2 },
      connector: { ledger: store.ledger, journal: { leaseMs: 200 } },
    });
    const steps = [
      { type: 'delta', text: 'one ' },
      { type: 'sleep', ms: 300 },
      ...['two ', 'three ', 'four ', 'five '].map((text) => ({ type: 'delta', text })),
      { type: 'sleep', ms: 1500 },
      { type: 'complete', output: 'done' },
    ];
    const runId = await h.startRun({ input: 'takeover', sim_script: steps });
    expect(names(await readEvents(h, runId, { max_events: 1 }))).toHaveLength(1);
    await h.connector.close();
    await eventually(() => (simulatedNames(h, runId).length >= 5 ? true : undefined), 'the deltas emitted while no follower reads');
    const b = replica(h, store);
    try {
      const all = await readEvents(b, runId);
      expect(all.status, JSON.stringify(all.error)).toBe('completed');
      const journaled = output(all).events.map((event) => event.data['seq'] as number);
      const missing = simulatedSeqs(h, runId).filter((seq) => !journaled.includes(seq));
      expect(missing.length).toBeGreaterThan(0);
      const [from, to] = [missing[0] as number, missing.at(-1) as number];
      expect(missing).toEqual(simulatedSeqs(h, runId).filter((seq) => seq >= from && seq <= to));
      expect(output(all).journal?.events_lost).toEqual([
        { after_sequence: journaled.filter((seq) => seq < from).length, reason: `replay_truncated: Hermes no longer kept seq ${from}..${to}` },
      ]);
      expect(journaled).toEqual(simulatedSeqs(h, runId).filter((seq) => seq < from || seq > to));
    } finally {
      await b.connector.close();
    }
  });

  it('a follower whose process died, on a Hermes that does not number events: the gap is recorded, never hidden', async () => {
    const { h, store } = await journaled({}, 'v0.20');
    const runId = await h.startRun({ input: 'takeover', sim_script: slowScript(2500) });
    const before = names(await readEvents(h, runId, { max_events: 1 }));
    await h.connector.close();
    const b = replica(h, store);
    try {
      const all = await readEvents(b, runId);
      const journal = output(all).journal;
      expect(journal?.state).not.toBe('following');
      expect(journal?.events_lost?.[0]?.reason).toMatch(/^follower_lost/);
      expect(journal?.events_lost?.[0]?.after_sequence).toBeGreaterThanOrEqual(before.length);
      expect(all.status).not.toBe('completed');
    } finally {
      await b.connector.close();
    }
  });

  it('a stream cut before its terminal event is closed reconciled by the status read, with the gap recorded', async () => {
    const { h } = await journaled();
    const runId = await h.startRun({
      input: 'cut',
      sim_script: [
        { type: 'delta', text: 'a' },
        { type: 'approval', command: 'ls' },
        { type: 'tool', tool: 'terminal' },
        { type: 'cut' },
        { type: 'complete' },
      ],
    });
    expect(names(await readEvents(h, runId, { max_events: 2 }))).toHaveLength(2);
    const approval = { run_id: runId, choice: 'once' };
    await h.invoke({ capability_id: h.cap('run_approval'), input: approval, idempotency_key: nextId('key') }, { approval: grantFor(approval) });
    const result = await readEvents(h, runId);
    expect(result.error?.code).toBe('connector.hermes_agent.stream_incomplete');
    expect(output(result).reconciliation?.status?.['status']).toBe('completed');
    expect(names(result)).toEqual(simulatedNames(h, runId).filter((name) => name !== 'run.completed'));
    const lastSequence = names(result).length;
    expect(output(result).journal).toEqual({
      state: 'reconciled',
      last_sequence: lastSequence,
      close_reason: 'status completed',
      events_lost: [{ after_sequence: lastSequence, reason: 'stream ended without its terminal event' }],
    });
  });

  it('per-run limits truncate the journal and say why; the reader gets what was kept and an incomplete result', async () => {
    const { h } = await journaled({ maxEventsPerRun: 3 });
    const runId = await h.startRun({
      input: 'many',
      sim_script: ['a', 'b', 'c', 'd', 'e'].map((text) => ({ type: 'delta', text })).concat([{ type: 'complete' } as never]),
    });
    const result = await readEvents(h, runId);
    expect(names(result)).toEqual(simulatedNames(h, runId).slice(0, 3));
    expect(result.error?.code).toBe('connector.hermes_agent.stream_incomplete');
    expect(output(result).journal).toMatchObject({ state: 'truncated', close_reason: 'max_events_per_run', last_sequence: 3 });

    const big = await journaled({ maxBytesPerRun: 2048 });
    const bigRun = await big.h.startRun({
      input: 'big',
      sim_script: [1, 2, 3].map(() => ({ type: 'delta', text: 'x'.repeat(900) })).concat([{ type: 'complete' } as never]),
    });
    const kept = await readEvents(big.h, bigRun);
    expect(output(kept).journal).toMatchObject({ state: 'truncated', close_reason: 'max_bytes_per_run' });
    expect(names(kept).length).toBeLessThan(simulatedNames(big.h, bigRun).length);
  });

  it('past the total size limit, new runs are not journaled beyond it: truncated, max_total_bytes', async () => {
    const { h } = await journaled({ maxTotalBytes: 1024, leaseMs: 100 });
    const big = [1, 2].map(() => ({ type: 'delta', text: 'x'.repeat(800) }));
    const first = await h.startRun({ input: 'fill', sim_script: [...big, { type: 'complete' }] });
    expect(output(await readEvents(h, first)).journal?.state).toBe('complete');
    // The total is re-read by each sweep (every leaseMs): a run started after one has seen it is refused.
    const refused = await eventuallyResult(
      async () => readEvents(h, await h.startRun({ input: 'more', sim_script: slowScript(0) })),
      (result) => output(result).journal?.state === 'truncated',
    );
    expect(output(refused).journal).toMatchObject({ state: 'truncated', close_reason: 'max_total_bytes', last_sequence: 0 });
  });

  it('a closed journal is purged once its retention has passed', async () => {
    let offset = 0;
    const store = await backend.create();
    const h = await harness({ connector: { ledger: store.ledger, journal: { leaseMs: 100, retentionMs: 1000 }, now: () => Date.now() + offset } });
    const runId = await h.startRun({ input: 'purge me', sim_script: slowScript(0) });
    expect((await readEvents(h, runId)).status).toBe('completed');
    expect((await readEvents(h, runId, { after_sequence: 1 })).status).toBe('completed');
    offset = 5000;
    const afterPurge = await eventuallyResult(
      () => readEvents(h, runId, { after_sequence: 0 }),
      (result) => result.error?.code === 'connector.hermes_agent.invalid_input',
    );
    expect(afterPurge.error?.message).toMatch(/has none/);
  });

  it('the key Hermes echoes is redacted before it is stored', async () => {
    const { h, store } = await journaled();
    const runId = await h.startRun({ input: 'echo', sim_script: [{ type: 'delta', text: `key=${API_KEY};` }, { type: 'complete' }] });
    const result = await readEvents(h, runId);
    expect(result.status).toBe('completed');
    expect(JSON.stringify(result)).not.toContain(API_KEY);
    expect(output(result).text).toBe('key=[REDACTED];');
    if (store.path) {
      const db = new Database(store.path, { readonly: true });
      try {
        const stored = db.prepare('SELECT event FROM run_journal_events').all() as Array<{ event: string }>;
        expect(stored.length).toBeGreaterThan(0);
        expect(stored.some((row) => row.event.includes('[REDACTED]'))).toBe(true);
        for (const row of stored) expect(row.event).not.toContain(API_KEY);
      } finally {
        db.close();
      }
    }
  });

  it("a tenant reads only its own runs' journals", async () => {
    const { h } = await journaled();
    const runId = await h.startRun({ input: 'mine', sim_script: slowScript(0) }, { context: { tenantId: 'tenant-a' } });
    const other = await readEvents(h, runId, {}, { tenantId: 'tenant-b' });
    expect(other.error?.code).toBe('connector.hermes_agent.not_found');
    expect(output(other)).toBeUndefined();
    const none = await readEvents(h, runId);
    expect(none.error?.code).toBe('connector.hermes_agent.not_found');
    const own = await readEvents(h, runId, {}, { tenantId: 'tenant-a' });
    expect(own.status, JSON.stringify(own.error)).toBe('completed');
    expect(names(own)).toEqual(simulatedNames(h, runId));
  });

  it("connectors of two tenants sharing the ledger and an endpoint id, each with its own Hermes, never take over each other's journals", async () => {
    const store = await backend.create();
    const journals = journalStoreOf(store.open()) as JournalStore;
    const tenant = (tenantId: string, ledger: RunLedger) =>
      harness({ endpoint: { tenantId }, connector: { ledger, journal: { leaseMs: 200 } }, simulator: { profile: 'later' } });
    const [a, b] = [await tenant('tenant-a', store.ledger), await tenant('tenant-b', store.open())];
    const replicaOf = (h: Harness, tenantId: string) =>
      checkedConnector(
        createHermesConnector({
          endpoints: [{ id: ENDPOINT, baseUrl: h.sim.url, apiKey: API_KEY, tenantId }],
          ledger: store.open(),
          journal: { leaseMs: 200 },
        }),
      );
    const startWaiting = async (h: Harness, tenantId: string): Promise<JournalKey> => {
      const runId = await h.startRun({ input: tenantId, sim_script: script.approval() }, { context: { tenantId } });
      return { tenant_id: tenantId, endpoint_id: ENDPOINT, run_id: runId };
    };

    // Tenant a's follower dies while its run waits for an approval: its journal lapses.
    const runA = await startWaiting(a, 'tenant-a');
    await a.connector.close();
    const lapsedA = await eventually(
      async () => {
        const record = await journals.journal(runA);
        return record !== null && (record.lease_expires_at ?? Number.POSITIVE_INFINITY) < Date.now() ? record : undefined;
      },
      "tenant a's lease lapsed",
      1000,
    );
    // Then tenant b's follower dies too: its journal lapses later than a's.
    const runB = await startWaiting(b, 'tenant-b');
    const firstOwnerB = (await journals.journal(runB))?.owner;
    await b.connector.close();

    // A connector of tenant b takes b's journal over: its sweep saw a's lapsed journal too, and left it.
    const b2 = replicaOf(b, 'tenant-b');
    try {
      await eventually(async () => ((await journals.journal(runB))?.owner ?? firstOwnerB) !== firstOwnerB || undefined, "tenant b's takeover", 1000);
      expect(await journals.journal(runA)).toEqual(lapsedA);
      expect(b.sim.requests.some((request) => request.path.includes(runA.run_id))).toBe(false);
    } finally {
      await b2.connector.close();
    }

    // A connector of tenant a takes a's journal over, and it is whole.
    const a2 = replicaOf(a, 'tenant-a');
    try {
      const approval = { run_id: runA.run_id, choice: 'once' };
      const context = { tenantId: 'tenant-a' };
      await a2.invoke({ capability_id: a2.cap('run_approval'), input: approval, idempotency_key: nextId('key') }, { ...context, approval: grantFor(approval) });
      const all = await readEvents(a2, runA.run_id, {}, context);
      expect(all.status, JSON.stringify(all.error)).toBe('completed');
      expect(names(all)).toEqual(simulatedNames(a, runA.run_id));
      expect(output(all).journal).toMatchObject({ state: 'complete', close_reason: 'run.completed' });
    } finally {
      await a2.connector.close();
    }
  });

  it.each([-1, 1.5, '2', null])('after_sequence %s is invalid_input, and nothing is read', async (afterSequence) => {
    const { h } = await journaled();
    const runId = await h.startRun({ input: 'bad input', sim_script: slowScript(0) });
    const result = await readEvents(h, runId, { after_sequence: afterSequence });
    expect(result.error?.code).toBe('connector.hermes_agent.invalid_input');
    expect(h.chunks.get(result.action_id)?.some((chunk) => chunk.kind !== 'error')).toBe(false);
  });
});

describe('run journal configuration', () => {
  it('after_sequence without the journal is invalid_input, and Hermes is not asked', async () => {
    const h = await harness();
    const runId = await h.startRun({ input: 'no journal', sim_script: slowScript(0) });
    const before = h.sim.requests.length;
    const result = await readEvents(h, runId, { after_sequence: 0 });
    expect(result.error?.code).toBe('connector.hermes_agent.invalid_input');
    expect(h.sim.requests.length).toBe(before);
  });

  it.each([
    [{ journal: {} }, 'invalid_journal'],
    [{ journal: { leaseMs: 50 }, ledger: 'durable' }, 'invalid_journal'],
    [{ journal: { followers: 3 }, ledger: 'durable' }, 'unknown_option'],
    [{ journal: 'on', ledger: 'durable' }, 'invalid_journal'],
  ])('%j is refused with %s', async (options, code) => {
    const store = await DURABLE_BACKENDS[0]!.create();
    const { ledger, ...rest } = options as { ledger?: string; journal: unknown };
    const create = () =>
      createHermesConnector({
        endpoints: [{ id: ENDPOINT, baseUrl: 'http://127.0.0.1:1', apiKey: API_KEY }],
        ...(ledger ? { ledger: store.ledger } : {}),
        ...rest,
      } as never);
    expect(create).toThrow(expect.objectContaining({ code }));
  });
});

/** Calls `call` until `done` holds for its result (bounded only to fail a hung test). */
async function eventuallyResult(call: () => Promise<AipActionResult>, done: (result: AipActionResult) => boolean): Promise<AipActionResult> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const result = await call();
    if (done(result)) return result;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`never happened (${nextId('attempt')})`);
}
