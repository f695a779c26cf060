/**
 * Run bindings and evidence through the connector, the same cases for every ledger backend:
 * what run_start records, how run_status / run_events / run_stop update it, cancel() of a
 * run_start action, and reconcile() (re-reads only open bindings; a 404 after a Hermes
 * restart is evidence lost, never "completed" or "failed").
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createMemoryLedger, type AipActionResult, type ExecutionContext, type RunEventsOutput, type RunEvidence } from 'aip-connector-hermes-agent';
import { captureLogger } from '../helpers/capture-logger.js';
import { API_KEY, ENDPOINT, eventually, grantFor, harnessFactory, nextId, script, type Harness } from '../helpers/harness.js';
import { LEDGER_BACKENDS } from '../helpers/ledgers.js';

const PREFIX = 'connector.hermes_agent.';
const UNKNOWN_RUN = `run_${'f'.repeat(32)}`;
const REVISION = createHash('sha256').update(API_KEY).digest('hex').slice(0, 12);

const harness = harnessFactory({ simulator: { streamLookupMs: 100 } });

interface Clock {
  t: number;
  tick(ms?: number): number;
}

const runIdOf = (result: AipActionResult) => (result.output as { run_id: string }).run_id;
const gets = (h: Harness, from: number) => h.sim.requests.slice(from).map((request) => `${request.method} ${request.path}`);

async function waitForStatus(h: Harness, runId: string, wanted: string): Promise<void> {
  await eventually(() => h.sim.run(runId)?.status === wanted || undefined, `run ${runId} ${wanted} (now ${h.sim.run(runId)?.status})`);
}

describe.each(LEDGER_BACKENDS)('run evidence: $name ledger', (backend) => {
  /** A harness on a fresh store, with a clock that moves only when told to (timestamps are then exact). */
  const setup = async (options: Parameters<typeof harness>[0] = {}) => {
    const store = await backend.create();
    const clock: Clock = {
      t: Date.now(),
      tick(ms = 1000) {
        this.t += ms;
        return this.t;
      },
    };
    const h = await harness({ ...options, connector: { ...options.connector, ledger: store.ledger, now: () => clock.t } });
    const start = (body: Record<string, unknown>, context?: ExecutionContext) =>
      h.invoke({ capability_id: h.cap('run_start'), input: { body }, idempotency_key: nextId('key') }, context);
    const status = (runId: string) => h.invoke({ capability_id: h.cap('run_status'), input: { run_id: runId } });
    const events = (runId: string, context?: ExecutionContext) => h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } }, context);
    const stop = (runId: string) =>
      h.invoke(
        { capability_id: h.cap('run_stop'), input: { run_id: runId }, idempotency_key: nextId('key') },
        { approval: grantFor({ run_id: runId }, {}, clock.t) },
      );
    const approve = (runId: string) => {
      const input = { run_id: runId, choice: 'once' };
      return h.invoke({ capability_id: h.cap('run_approval'), input, idempotency_key: nextId('key') }, { approval: grantFor(input, {}, clock.t) });
    };
    /** Starts a run and returns its result and the evidence expected right after. */
    const started = async (body: Record<string, unknown>, context?: ExecutionContext) => {
      const at = clock.tick();
      const result = await start(body, context);
      expect(result.status, JSON.stringify(result.error)).toBe('completed');
      const runId = runIdOf(result);
      const evidence: RunEvidence = {
        action_id: result.action_id,
        capability_id: h.cap('run_start'),
        endpoint_id: ENDPOINT,
        tenant_id: context?.tenantId ?? null,
        run_id: runId,
        session_id: typeof body['session_id'] === 'string' ? body['session_id'] : runId,
        credential_revision: REVISION,
        created_at: at,
        updated_at: at,
        last_status: 'started',
        terminal_event: null,
        evidence_lost: false,
        learned_from: 'start_answer',
      };
      return { result, runId, evidence };
    };
    return { h, store, clock, start, status, events, stop, approve, started };
  };

  describe('what run_start records', () => {
    it('with a verified tenant and a session_id: the binding, by action id and by run id', async () => {
      const { h, started } = await setup();
      const { result, runId, evidence } = await started({ input: 'hi', session_id: 'session-evidence-1', sim_script: script.long() }, { tenantId: 'tenant-a' });
      expect(evidence.tenant_id).toBe('tenant-a');
      expect(evidence.session_id).toBe('session-evidence-1');
      expect(await h.connector.evidence(result.action_id)).toEqual(evidence);
      expect(await h.connector.evidence(runId)).toEqual(evidence);
    });

    it('without a tenant or session_id: tenant_id null, session_id is the run id', async () => {
      const { h, started } = await setup();
      const { result, runId, evidence } = await started({ input: 'hi', sim_script: script.long() });
      const seen = await h.connector.evidence(result.action_id);
      expect(seen).toEqual(evidence);
      expect(seen?.tenant_id).toBeNull();
      expect(seen?.session_id).toBe(runId);
    });

    it('an endpoint bound to a tenant records that tenant', async () => {
      const { h, started } = await setup({ endpoint: { tenantId: 'tenant-bound' } });
      const { result, evidence } = await started({ input: 'hi', sim_script: script.quick() }, { tenantId: 'tenant-bound' });
      expect(await h.connector.evidence(result.action_id)).toEqual({ ...evidence, tenant_id: 'tenant-bound' });
    });

    it('the credential revision is 12 lowercase hex digits of the key hash, never the key', async () => {
      const { h, started } = await setup();
      const { result } = await started({ input: 'hi', sim_script: script.quick() });
      const seen = (await h.connector.evidence(result.action_id)) as RunEvidence;
      expect(seen.credential_revision).toMatch(/^[0-9a-f]{12}$/);
      expect(seen.credential_revision).toBe(REVISION);
      expect(JSON.stringify(seen)).not.toContain(API_KEY);
    });

    it('a failed start binds nothing, a replay does not rebind the run; unknown ids are null', async () => {
      const { h, start, started } = await setup();
      h.sim.injectFault({ route: 'start', response: { status: 500 } });
      const failed = await start({ input: 'fails' });
      expect(failed.status).toBe('failed');
      expect(await h.connector.evidence(failed.action_id)).toBeNull();

      const key = nextId('key');
      const body = { input: 'once', sim_script: script.quick() };
      const first = await h.invoke({ capability_id: h.cap('run_start'), input: { body }, idempotency_key: key });
      const replay = await h.invoke({ capability_id: h.cap('run_start'), input: { body }, idempotency_key: key });
      expect(replay.receipt?.replayed).toBe(true);
      expect((await h.connector.evidence(runIdOf(first)))?.action_id).toBe(first.action_id);

      await started({ input: 'another', sim_script: script.quick() });
      expect(await h.connector.evidence('act_never_seen')).toBeNull();
      expect(await h.connector.evidence(UNKNOWN_RUN)).toBeNull();
      expect(await h.connector.evidence('')).toBeNull();
    });
  });

  describe('later results update the binding', () => {
    it('run_events to completion: terminal_event run.completed, last_status completed', async () => {
      const { h, clock, events, started } = await setup();
      const { result, runId, evidence } = await started({ input: 'hi', sim_script: script.quick() });
      const at = clock.tick();
      const read = await events(runId);
      expect(read.status).toBe('completed');
      expect(await h.connector.evidence(result.action_id)).toEqual({ ...evidence, updated_at: at, last_status: 'completed', terminal_event: 'run.completed' });
    });

    it('a failing run: terminal_event run.failed, last_status failed', async () => {
      const { h, clock, events, started } = await setup();
      const { runId, evidence } = await started({
        input: 'hi',
        sim_script: [
          { type: 'delta', text: 'x' },
          { type: 'fail', error: 'boom' },
        ],
      });
      const at = clock.tick();
      await events(runId);
      expect(await h.connector.evidence(runId)).toEqual({ ...evidence, updated_at: at, last_status: 'failed', terminal_event: 'run.failed' });
    });

    it('run_status updates last_status', async () => {
      const { h, clock, status, started } = await setup();
      const { runId, evidence } = await started({ input: 'hi', sim_script: script.long() });
      await waitForStatus(h, runId, 'running');
      const at = clock.tick();
      const read = await status(runId);
      expect((read.output as { status: string }).status).toBe('running');
      expect(await h.connector.evidence(runId)).toEqual({ ...evidence, updated_at: at, last_status: 'running' });
    });

    it('run_stop sets stopping; the events that follow set cancelled', async () => {
      const { h, clock, events, stop, started } = await setup();
      const { runId, evidence } = await started({ input: 'hi', sim_script: script.long() });
      const stoppedAt = clock.tick();
      const stopped = await stop(runId);
      expect(stopped.output).toEqual({ run_id: runId, status: 'stopping' });
      expect(await h.connector.evidence(runId)).toEqual({ ...evidence, updated_at: stoppedAt, last_status: 'stopping' });

      const readAt = clock.tick();
      const read = await events(runId);
      expect((read.output as RunEventsOutput).terminal_event).toBe('run.cancelled');
      expect(await h.connector.evidence(runId)).toEqual({ ...evidence, updated_at: readAt, last_status: 'cancelled', terminal_event: 'run.cancelled' });
    });

    it('a stream cut: last_status is what the reconciliation read found', async () => {
      const { h, clock, events, approve, started } = await setup();
      const { runId, evidence } = await started({
        input: 'hi',
        sim_script: [
          { type: 'delta', text: 'before' },
          { type: 'approval', command: 'ls' },
          { type: 'cut' },
          { type: 'sleep', ms: 60_000 },
          { type: 'complete' },
        ],
      });
      // The cut must reach a live subscriber: the script waits at its approval until the reader has seen it.
      const onChunk: ExecutionContext['onChunk'] = async (chunk) => {
        if (chunk.kind !== 'pending_approval') return;
        expect((await approve(runId)).status).toBe('completed');
      };
      const at = clock.tick();
      const read = await events(runId, { onChunk });
      expect(read.error?.code).toBe(`${PREFIX}stream_incomplete`);
      const output = read.output as RunEventsOutput;
      expect(output.reconciliation?.http_status).toBe(200);
      const reconciled = (output.reconciliation?.status as { status: string }).status;
      expect(reconciled).toBe('running');
      expect(await h.connector.evidence(runId)).toEqual({ ...evidence, updated_at: at, last_status: reconciled });
    });

    it('a status read of a run this connector did not start records nothing', async () => {
      const { h, status, started } = await setup();
      const { runId, evidence } = await started({ input: 'hi', sim_script: script.long() });
      const read = await status(UNKNOWN_RUN);
      expect(read.error?.code).toBe(`${PREFIX}not_found`);
      expect(await h.connector.evidence(UNKNOWN_RUN)).toBeNull();
      expect(await h.connector.evidence(runId)).toEqual(evidence);
    });
  });

  describe('cancel() of a run_start action', () => {
    it('stops the bound run and returns the stop result; a second cancel makes no second stop', async () => {
      const { h, clock, started } = await setup();
      const body = { input: 'hi', sim_script: script.long() };
      const { result, runId, evidence } = await started(body);
      await waitForStatus(h, runId, 'running');
      const action = { id: result.action_id, capability_id: h.cap('run_start'), input: { body } };
      const at = clock.tick();
      const before = h.sim.requests.length;
      const cancelled = await h.cancel(action);
      expect(gets(h, before)).toEqual([`POST /v1/runs/${runId}/stop`]);
      expect(cancelled?.status, JSON.stringify(cancelled?.error)).toBe('completed');
      expect(cancelled?.action_id).toBe(result.action_id);
      expect(cancelled?.output).toEqual({ run_id: runId, status: 'stopping' });
      expect(cancelled?.receipt).toMatchObject({ operation: 'run_stop', capability_id: h.cap('run_stop'), http_status: 200 });
      await waitForStatus(h, runId, 'cancelled');
      expect(await h.connector.evidence(runId)).toEqual({ ...evidence, updated_at: at, last_status: 'stopping' });

      const again = await h.cancel(action);
      expect(again?.receipt?.replayed).toBe(true);
      expect(h.sim.requests.filter((request) => request.path === `/v1/runs/${runId}/stop`)).toHaveLength(1);
    });

    it('a run_start action with no binding: null, and no request', async () => {
      const { h, start } = await setup();
      const before = h.sim.requests.length;
      expect(await h.cancel({ id: nextId(), capability_id: h.cap('run_start'), input: { body: { input: 'never started' } } })).toBeNull();
      // A start that failed binds nothing either.
      h.sim.injectFault({ route: 'start', response: { status: 400, body: JSON.stringify({ error: { message: 'no', type: 'invalid_request_error' } }) } });
      const failed = await start({ input: 'refused' });
      expect(failed.status).toBe('failed');
      const afterStart = h.sim.requests.length;
      expect(afterStart).toBe(before + 1);
      expect(await h.cancel({ id: failed.action_id, capability_id: h.cap('run_start'), input: { body: { input: 'refused' } } })).toBeNull();
      expect(h.sim.requests.length).toBe(afterStart);
    });
  });

  describe('reconcile()', () => {
    it('re-reads only the open bindings, updates them, and after a Hermes restart marks them evidence_lost', async () => {
      const { h, clock, events, stop, status, started } = await setup();
      const open1 = await started({ input: 'long one', sim_script: script.long() });
      const open2 = await started({ input: 'long two', session_id: 'session-two', sim_script: script.long() }, { tenantId: 'tenant-r' });
      const done = await started({ input: 'quick', sim_script: script.quick() });
      expect((await events(done.runId)).status).toBe('completed');
      const cancelled = await started({ input: 'stopped', sim_script: script.long() });
      await stop(cancelled.runId);
      expect((await events(cancelled.runId)).status).toBe('cancelled');
      const closedBefore = [await h.connector.evidence(done.runId), await h.connector.evidence(cancelled.runId)];
      await waitForStatus(h, open1.runId, 'running');
      await waitForStatus(h, open2.runId, 'running');

      const firstAt = clock.tick();
      let before = h.sim.requests.length;
      const first = await h.connector.reconcile();
      expect(gets(h, before).sort()).toEqual([`GET /v1/runs/${open1.runId}`, `GET /v1/runs/${open2.runId}`].sort());
      const running = [
        { ...open1.evidence, updated_at: firstAt, last_status: 'running' },
        { ...open2.evidence, updated_at: firstAt, last_status: 'running' },
      ];
      const byRun = (list: RunEvidence[]) => [...list].sort((a, b) => a.run_id.localeCompare(b.run_id));
      expect(byRun(first)).toEqual(byRun(running));
      expect(await h.connector.evidence(open1.runId)).toEqual(running[0]);
      expect(await h.connector.evidence(open2.runId)).toEqual(running[1]);

      // Hermes at the pin forgets every run on restart: every id answers 404.
      h.sim.restart();
      await eventually(async () => (await status(UNKNOWN_RUN)).error?.code === `${PREFIX}not_found` || undefined, 'the simulator to answer after its restart');
      const lostAt = clock.tick();
      before = h.sim.requests.length;
      const second = await h.connector.reconcile();
      expect(gets(h, before).sort()).toEqual([`GET /v1/runs/${open1.runId}`, `GET /v1/runs/${open2.runId}`].sort());
      const lost = running.map((evidence) => ({ ...evidence, updated_at: lostAt, evidence_lost: true }));
      expect(byRun(second)).toEqual(byRun(lost));
      for (const evidence of second) {
        expect(['completed', 'failed']).not.toContain(evidence.last_status);
        expect(evidence.terminal_event).toBeNull();
      }
      expect(await h.connector.evidence(open1.result.action_id)).toEqual(lost[0]);

      // Lost and terminal bindings are not read again; the terminal ones never changed.
      before = h.sim.requests.length;
      expect(await h.connector.reconcile()).toEqual([]);
      expect(h.sim.requests.length).toBe(before);
      expect([await h.connector.evidence(done.runId), await h.connector.evidence(cancelled.runId)]).toEqual(closedBefore);
      expect(closedBefore.map((evidence) => evidence?.last_status)).toEqual(['completed', 'cancelled']);
    });

    it('with nothing open: [] and no request', async () => {
      const { h, events, started } = await setup();
      const done = await started({ input: 'quick', sim_script: script.quick() });
      await events(done.runId);
      const before = h.sim.requests.length;
      expect(await h.connector.reconcile()).toEqual([]);
      expect(h.sim.requests.length).toBe(before);
    });
  });
});

describe('a ledger that fails to keep evidence', () => {
  /** A memory ledger whose updateRun fails: by rejecting, or (a custom ledger's mistake) by throwing. */
  const failingLedger = (how: 'rejects' | 'throws') => {
    const ledger = createMemoryLedger();
    const secret = `password=${API_KEY}`;
    ledger.updateRun =
      how === 'rejects'
        ? () => Promise.reject(new RangeError(secret))
        : () => {
            throw new RangeError(secret);
          };
    return ledger;
  };

  for (const how of ['rejects', 'throws'] as const) {
    it(`whose updateRun ${how}: the status read still completes, and the log names only the error class`, async () => {
      const capture = captureLogger();
      const h = await harness({ connector: { ledger: failingLedger(how), logger: capture.logger } });
      const started = await h.invoke({
        capability_id: h.cap('run_start'),
        input: { body: { input: 'hi', sim_script: script.long() } },
        idempotency_key: nextId('key'),
      });
      expect(started.status).toBe('completed');

      const read = await h.invoke({ capability_id: h.cap('run_status'), input: { run_id: runIdOf(started) } });
      expect(read.status, JSON.stringify(read.error)).toBe('completed');
      expect(read.error).toBeUndefined();
      const failures = capture.lines.filter((line) => line['msg'] === 'run ledger failed to keep evidence');
      expect(failures).toHaveLength(1);
      expect(failures[0]?.['err']).toBe('RangeError');
      expect(capture.raw()).not.toContain(API_KEY);
    });
  }
});
