/**
 * The journal's followers are bounded per endpoint: past `followersPerEndpoint` a run waits its
 * turn (in arrival order) and is followed, whole, once a follower is free.
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createHermesConnector, type AipActionResult, type RunEventsOutput } from 'aip-connector-hermes-agent';
import { captureLogger } from '../helpers/capture-logger.js';
import { API_KEY, checkedConnector, ENDPOINT, eventually, grantFor, harnessFactory, nextId, script, type Harness } from '../helpers/harness.js';
import { DURABLE_BACKENDS } from '../helpers/ledgers.js';

const harness = harnessFactory({ simulator: { streamLookupMs: 100 } });
const names = (result: AipActionResult) => (result.output as RunEventsOutput).events.map((event) => event.event);
const simulatedNames = (h: Harness, runId: string) => h.sim.run(runId)?.events.map((event) => event['event']);
const streamRequests = (h: Harness) => h.sim.requests.filter((request) => request.path.endsWith('/events'));

describe.each(DURABLE_BACKENDS)('journal followers on $name', (backend) => {
  it('with one follower per endpoint, a second run waits until the first is followed to its end, then is journaled whole', async () => {
    const store = await backend.create();
    const h = await harness({ connector: { ledger: store.ledger, journal: { followersPerEndpoint: 1, leaseMs: 200 } } });
    const blocked = await h.startRun({ input: 'first', sim_script: script.approval() });
    const waiting = await h.startRun({ input: 'second', sim_script: script.quick() });
    expect(names(await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: blocked, max_events: 2 } }))).toHaveLength(2);

    const early = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: waiting } }, { deadline: Date.now() + 300 });
    expect(early.error?.code).toBe('connector.hermes_agent.deadline_exceeded');
    expect(names(early)).toEqual([]);
    expect(streamRequests(h).map((request) => request.path)).toEqual([`/v1/runs/${blocked}/events`]);

    const approval = { run_id: blocked, choice: 'once' };
    await h.invoke({ capability_id: h.cap('run_approval'), input: approval, idempotency_key: nextId('key') }, { approval: grantFor(approval) });
    const first = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: blocked } });
    const second = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: waiting } });
    expect(names(first)).toEqual(simulatedNames(h, blocked));
    expect(second.status, JSON.stringify(second.error)).toBe('completed');
    expect(names(second)).toEqual(simulatedNames(h, waiting));
  });
});

describe('a journal whose closing writes the ledger refuses', () => {
  it('is closed once the ledger takes writes again, never left held as following', { timeout: 90_000 }, async () => {
    const store = await DURABLE_BACKENDS.find((backend) => backend.name === 'sqlite')!.create();
    const { logger, lines } = captureLogger();
    const h = await harness({ connector: { ledger: store.ledger, logger, journal: { leaseMs: 300 } } });
    const runId = await h.startRun({ input: 'blocked', sim_script: script.approval() });
    expect(names(await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId, max_events: 2 } }))).toHaveLength(2);
    // Another connection holds the write lock: every write of the follower fails (after SQLite's busy timeout).
    const locker = new Database(store.path as string);
    locker.exec('BEGIN EXCLUSIVE');
    try {
      // Answered through a connector of its own (memory ledger): the locked ledger must not stand in the way of the approval.
      const answering = checkedConnector(createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: h.sim.url, apiKey: API_KEY }] }));
      const approval = { run_id: runId, choice: 'once' };
      const answered = await answering.invoke(
        { capability_id: h.cap('run_approval'), input: approval, idempotency_key: nextId('key') },
        { approval: grantFor(approval) },
      );
      await answering.connector.close();
      expect(answered.status, JSON.stringify(answered.error)).toBe('completed');
      await eventually(() => lines.some((line) => line['msg'] === 'run journal ledger failed' && line['stage'] === 'close'), 'a failed close', 4000);
    } finally {
      locker.exec('COMMIT');
      locker.close();
    }
    const result = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } });
    const journal = (result.output as RunEventsOutput).journal;
    expect(journal).toMatchObject({ state: 'abandoned', close_reason: 'ledger_write_failed' });
    expect(journal?.events_lost?.at(-1)).toEqual({ after_sequence: journal?.last_sequence, reason: 'ledger_write_failed' });
  });
});
