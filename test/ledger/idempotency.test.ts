/**
 * Idempotency through the connector, against the simulator, the same cases for every ledger
 * backend: one provider call per (capability, key); the same input replays the original
 * result, another input is a conflict; a duplicate in flight waits; outcomes where Hermes
 * certainly did nothing are not recorded (the provider is called again), effects and
 * uncertain outcomes are recorded and replayed; keys expire after 24 h; the key travels as
 * `Idempotency-Key`.
 */
import { createServer, type AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createHermesConnector, type AipActionResult, type ExecutionContext } from 'aip-connector-hermes-agent';
import { API_KEY, ENDPOINT, eventually, grantFor, harnessFactory, nextId, script, type Harness } from '../helpers/harness.js';
import { LEDGER_BACKENDS } from '../helpers/ledgers.js';
import { gateSettlesUntilInFlightSeen } from '../helpers/ledger-gate.js';
import { startBlackHole } from '../helpers/ledger-black-hole.js';
import { providerKeyOf } from '../helpers/provider-key.js';

const PREFIX = 'connector.hermes_agent.';
const TTL = 24 * 60 * 60 * 1000;
const MiB = 1024 * 1024;

const harness = harnessFactory({ simulator: { streamLookupMs: 100 } });

const posts = (h: Harness, path: string) => h.sim.requests.filter((request) => request.method === 'POST' && request.path === path);
const startPosts = (h: Harness) => posts(h, '/v1/runs');

const start = (h: Harness, body: Record<string, unknown>, key: string, context?: ExecutionContext) =>
  h.invoke({ capability_id: h.cap('run_start'), input: { body }, idempotency_key: key }, context);
const stop = (h: Harness, runId: string, key: string, context: ExecutionContext = { approval: grantFor({ run_id: runId }) }) =>
  h.invoke({ capability_id: h.cap('run_stop'), input: { run_id: runId }, idempotency_key: key }, context);
const approve = (h: Harness, input: { run_id: string; choice: string }, key: string) =>
  h.invoke({ capability_id: h.cap('run_approval'), input, idempotency_key: key }, { approval: grantFor(input) });

const runIdOf = (result: AipActionResult) => (result.output as { run_id: string }).run_id;

/** What a replay must be: the original, under the new action id, marked replayed with the original action id. */
function replayOf(original: AipActionResult, actionId: string): AipActionResult {
  return {
    ...original,
    action_id: actionId,
    receipt: { ...original.receipt!, replayed: true, replayed_by: 'connector', original_action_id: original.action_id },
  };
}

function expectCompletedFresh(result: AipActionResult): void {
  expect(result.status, JSON.stringify(result.error)).toBe('completed');
  expect(result.receipt?.replayed).toBeUndefined();
  expect(result.receipt?.original_action_id).toBeUndefined();
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
  return port;
}

async function waitForStatus(h: Harness, runId: string, wanted: string): Promise<void> {
  await eventually(() => h.sim.run(runId)?.status === wanted || undefined, `run ${runId} ${wanted} (now ${h.sim.run(runId)?.status})`);
}

describe.each(LEDGER_BACKENDS)('idempotency through the connector: $name ledger', (backend) => {
  const withLedger = async (options: Parameters<typeof harness>[0] = {}) => {
    const store = await backend.create();
    const h = await harness({ ...options, connector: { ...options.connector, ledger: store.ledger } });
    return { h, store };
  };

  describe('same key, same input', () => {
    it('one provider start; the second result is the first under the new action id, marked replayed', async () => {
      const { h } = await withLedger();
      const key = nextId('key');
      const body = { input: 'hi', sim_script: script.long() };
      const first = await start(h, body, key);
      expectCompletedFresh(first);
      const second = await start(h, structuredClone(body), key);
      expect(h.sim.startCount()).toBe(1);
      expect(startPosts(h)).toHaveLength(1);
      expect(second.action_id).not.toBe(first.action_id);
      expect(second).toEqual(replayOf(first, second.action_id));
      expect(second.receipt?.replayed).toBe(true);
      expect(second.receipt?.original_action_id).toBe(first.action_id);
    });

    it('the input is compared canonically: the same fields in another order are the same input', async () => {
      const { h } = await withLedger();
      const key = nextId('key');
      const first = await start(h, { input: 'hi', instructions: 'be brief', sim_script: script.quick() }, key);
      const second = await start(h, { sim_script: script.quick(), instructions: 'be brief', input: 'hi' }, key);
      expect(second).toEqual(replayOf(first, second.action_id));
      expect(startPosts(h)).toHaveLength(1);
    });

    it('the key is scoped to the capability: the same key on run_stop is another call', async () => {
      const { h } = await withLedger();
      const key = nextId('key');
      const first = await start(h, { input: 'hi', sim_script: script.long() }, key);
      const runId = runIdOf(first);
      const stopped = await stop(h, runId, key);
      expectCompletedFresh(stopped);
      expect(stopped.output).toEqual({ run_id: runId, status: 'stopping' });
      expect(posts(h, `/v1/runs/${runId}/stop`)).toHaveLength(1);
    });
  });

  describe('same key, different input', () => {
    it('failed idempotency_conflict (permanent, not retryable, the original action id), and no provider request', async () => {
      const { h } = await withLedger();
      const key = nextId('key');
      const body = { input: 'hi', sim_script: script.long() };
      const first = await start(h, body, key);
      expectCompletedFresh(first);
      const before = h.sim.requests.length;
      const conflict = await start(h, { ...body, input: 'something else' }, key);
      expect(h.sim.requests.length).toBe(before);
      expect(conflict.status).toBe('failed');
      expect(conflict.output).toBeUndefined();
      expect(conflict.error).toMatchObject({ code: `${PREFIX}idempotency_conflict`, category: 'permanent', retryable: false });
      expect(conflict.error?.details).toEqual({ original_action_id: first.action_id, uncertain_outcome: false, endpoint_id: ENDPOINT, operation: 'run_start' });
      // The conflict itself is not recorded: the original input still replays the original result.
      const again = await start(h, body, key);
      expect(again).toEqual(replayOf(first, again.action_id));
      expect(h.sim.startCount()).toBe(1);
    });

    it('a session_key is part of the input', async () => {
      const { h } = await withLedger();
      const key = nextId('key');
      const body = { input: 'hi', sim_script: script.quick() };
      await h.invoke({ capability_id: h.cap('run_start'), input: { body, session_key: 'memory-a' }, idempotency_key: key });
      const other = await h.invoke({ capability_id: h.cap('run_start'), input: { body, session_key: 'memory-b' }, idempotency_key: key });
      expect(other.error?.code).toBe(`${PREFIX}idempotency_conflict`);
      expect(startPosts(h)).toHaveLength(1);
    });
  });

  describe('a duplicate in flight waits for the first', () => {
    it('two run_start with one key fired together: one POST, both completed with the same run, exactly one replayed', async () => {
      const store = await backend.create();
      // settle is held back until the second claim has met the first one in flight.
      const gate = gateSettlesUntilInFlightSeen([store.ledger]);
      const h = await harness({ connector: { ledger: gate.ledgers[0]! } });
      const key = nextId('key');
      const body = { input: 'together', sim_script: script.long() };
      const results = await Promise.all([start(h, body, key), start(h, structuredClone(body), key)]);

      expect(gate.inFlightSeen()).toBeGreaterThanOrEqual(1);
      expect(startPosts(h)).toHaveLength(1);
      expect(h.sim.startCount()).toBe(1);
      for (const result of results) expect(result.status, JSON.stringify(result.error)).toBe('completed');
      expect(runIdOf(results[0])).toBe(runIdOf(results[1]));
      const replayed = results.filter((result) => result.receipt?.replayed === true);
      expect(replayed).toHaveLength(1);
      const original = results.find((result) => result.receipt?.replayed !== true)!;
      expect(replayed[0]).toEqual(replayOf(original, replayed[0]!.action_id));
    });
  });

  describe('a duplicate of a call still in flight', () => {
    it('waits only within its own deadline or until its signal aborts; the live owner renews its lease, so its claim is never declared abandoned', async () => {
      const store = await backend.create();
      const gate = gateSettlesUntilInFlightSeen([store.ledger]);
      const hole = await startBlackHole();
      const leaseMs = 600;
      const connector = createHermesConnector({
        endpoints: [{ id: ENDPOINT, baseUrl: hole.url, apiKey: API_KEY }],
        ledger: gate.ledgers[0]!,
        idempotencyLeaseMs: leaseMs,
      });
      const capability = `cap:hermes_agent:${ENDPOINT}:run_start`;
      const key = nextId('key');
      const input = { body: { input: 'slow' } };
      const scope = { capability_id: capability, idempotency_key: key };
      const action = () => ({ id: nextId(), capability_id: capability, input: structuredClone(input), idempotency_key: key });
      const firstAction = action();
      const firstCall = connector.invoke(firstAction);
      try {
        await eventually(() => hole.received.length === 1 || undefined, 'the first POST to reach the (silent) provider');
        const claimed = await store.ledger.get(scope, Date.now());
        expect(claimed).toMatchObject({ state: 'in_flight', action_id: firstAction.id });
        await eventually(
          async () => ((await store.ledger.get(scope, Date.now()))?.lease_expires_at ?? 0) > (claimed?.lease_expires_at ?? Infinity) || undefined,
          'the owner to renew its lease',
        );

        // Its deadline lies beyond the owner's lease: only renewal keeps the claim from looking abandoned.
        const waited = await connector.invoke(action(), { deadline: Date.now() + leaseMs * 3 });
        expect(waited.status).toBe('failed');
        expect(waited.error).toMatchObject({ code: `${PREFIX}deadline_exceeded`, retryable: false });
        expect(waited.error?.details?.uncertain_outcome).toBe(true);

        const controller = new AbortController();
        const seen = gate.inFlightSeen();
        const abortedCall = connector.invoke(action(), { signal: controller.signal });
        await eventually(() => gate.inFlightSeen() > seen || undefined, 'the second duplicate to meet the claim in flight');
        controller.abort();
        const aborted = await abortedCall;
        expect(aborted.status).toBe('cancelled');
        expect(aborted.error?.code).toBe(`${PREFIX}cancelled`);

        expect(hole.received).toHaveLength(1);
        expect(await store.ledger.get(scope, Date.now())).toMatchObject({ state: 'in_flight', action_id: firstAction.id, result: null });
      } finally {
        await connector.close();
        await hole.close();
      }
      expect((await firstCall).status).not.toBe('completed');
    });
  });

  it('a ledger that fails before the call: ledger_unavailable (retryable), nothing is sent', async () => {
    const store = await backend.create();
    const failing = new Proxy(store.ledger, {
      get(target, property) {
        if (property === 'claim') return async () => Promise.reject(new Error('storage is down'));
        const value: unknown = Reflect.get(target, property);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    const h = await harness({ connector: { ledger: failing } });
    const result = await start(h, { input: 'hi' }, nextId('key'));
    expect(result.status).toBe('failed');
    expect(result.error).toMatchObject({ code: `${PREFIX}ledger_unavailable`, category: 'temporary', retryable: true });
    expect(result.error?.details?.uncertain_outcome).toBe(false);
    expect(h.sim.requests).toHaveLength(0);
  });

  describe('not recorded: Hermes certainly did nothing, so the same key reaches the provider again', () => {
    it('401: a connector with the wrong key, then one with the right key on the same ledger', async () => {
      const store = await backend.create();
      const h = await harness({ endpoint: { apiKey: 'hk_wrong_secret_key_9876543210' }, connector: { ledger: store.ledger } });
      const key = nextId('key');
      const body = { input: 'hi', sim_script: script.quick() };
      const refused = await start(h, body, key);
      expect(refused.status).toBe('failed');
      expect(refused.error).toMatchObject({ code: `${PREFIX}authentication`, retryable: false });
      expect(refused.error?.details?.remote_status).toBe(401);
      expect(startPosts(h)).toHaveLength(1);

      const right = createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: h.sim.url, apiKey: API_KEY }], ledger: store.ledger });
      try {
        const accepted = await right.invoke({ id: nextId(), capability_id: h.cap('run_start'), input: { body }, idempotency_key: key });
        expectCompletedFresh(accepted);
        expect(startPosts(h)).toHaveLength(2);
        expect(h.sim.startCount()).toBe(1);
        // Now it is recorded.
        const replay = await right.invoke({ id: nextId(), capability_id: h.cap('run_start'), input: { body }, idempotency_key: key });
        expect(replay).toEqual(replayOf(accepted, replay.action_id));
        expect(startPosts(h)).toHaveLength(2);
      } finally {
        await right.close();
      }
    });

    it('connection refused (nothing was sent): the same key reaches Hermes once it is there', async () => {
      const store = await backend.create();
      const refusedPort = await closedPort();
      const down = createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: `http://127.0.0.1:${refusedPort}`, apiKey: API_KEY }], ledger: store.ledger });
      const key = nextId('key');
      const body = { input: 'hi', sim_script: script.quick() };
      try {
        const refused = await down.invoke({ id: nextId(), capability_id: `cap:hermes_agent:${ENDPOINT}:run_start`, input: { body }, idempotency_key: key });
        expect(refused.status).toBe('failed');
        expect(refused.error?.code).toBe(`${PREFIX}transport`);
        expect(refused.error?.details?.uncertain_outcome).toBe(false);
      } finally {
        await down.close();
      }
      const h = await harness({ connector: { ledger: store.ledger } });
      expectCompletedFresh(await start(h, body, key));
      expect(startPosts(h)).toHaveLength(1);
    });

    it('429: the concurrency gate is full; once the slot is free the same key starts the run', async () => {
      const { h } = await withLedger({ simulator: { maxConcurrentRuns: 1 } });
      const holder = await h.startRun({ input: 'holder', sim_script: script.quick() }); // its unread stream holds the only slot
      const key = nextId('key');
      const body = { input: 'second', sim_script: script.quick() };
      const limited = await start(h, body, key);
      expect(limited.status).toBe('failed');
      expect(limited.error).toMatchObject({ code: `${PREFIX}rate_limited`, retryable: true });
      expect(limited.error?.details?.remote_status).toBe(429);
      expect(startPosts(h)).toHaveLength(2);

      // Reading the holder's stream to its end frees the slot.
      const events = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: holder } });
      expect(events.status).toBe('completed');
      // Each further try is a real POST (a recorded 429 would replay instead and never complete).
      const accepted = await eventually(async () => {
        const result = await start(h, body, key);
        return result.status === 'completed' ? result : undefined;
      }, 'the freed slot to accept the same key');
      expectCompletedFresh(accepted);
      expect(h.sim.startCount()).toBe(2);
      expect(startPosts(h).length).toBeGreaterThanOrEqual(3);
      expect(h.sim.run(runIdOf(accepted))?.body['input']).toBe('second');
    });

    it('413: a body over 10,000,000 bytes is refused; a different input with the same key is no conflict and reaches Hermes', async () => {
      const { h } = await withLedger({ connector: { limits: { maxRequestBodyBytes: 12 * MiB } } });
      const key = nextId('key');
      const refused = await start(h, { input: 'x'.repeat(10_000_100) }, key);
      expect(refused.status).toBe('failed');
      expect(refused.error).toMatchObject({ code: `${PREFIX}remote_rejected`, retryable: false });
      expect(refused.error?.details?.remote_status).toBe(413);
      expect(refused.error?.details?.uncertain_outcome).toBe(false);
      expect(startPosts(h)).toHaveLength(1);

      const small = await start(h, { input: 'small', sim_script: script.quick() }, key);
      expectCompletedFresh(small);
      expect(startPosts(h)).toHaveLength(2);
      expect(h.sim.startCount()).toBe(1);
    });

    it('a local limit failure inside the call (request body over limits.maxRequestBodyBytes) frees the key', async () => {
      const { h } = await withLedger({ connector: { limits: { maxRequestBodyBytes: 256 } } });
      const key = nextId('key');
      const refused = await start(h, { input: 'y'.repeat(1000) }, key);
      expect(refused.status).toBe('failed');
      expect(refused.error?.code).toBe(`${PREFIX}invalid_input`);
      expect(h.sim.requests).toHaveLength(0);
      const small = await start(h, { input: 'small', sim_script: script.quick() }, key);
      expectCompletedFresh(small);
      expect(startPosts(h)).toHaveLength(1);
    });

    it('local policy: run_stop without an approval is approval_required; with a grant the same key reaches Hermes', async () => {
      const { h } = await withLedger();
      const runId = await h.startRun({ input: 'long', sim_script: script.long() });
      const key = nextId('key');
      const before = h.sim.requests.length;
      const refused = await stop(h, runId, key, {});
      expect(refused.status).toBe('failed');
      expect(refused.error).toMatchObject({ code: `${PREFIX}approval_required`, category: 'policy', retryable: false });
      expect(h.sim.requests.length).toBe(before);

      const stopped = await stop(h, runId, key);
      expectCompletedFresh(stopped);
      expect(stopped.output).toEqual({ run_id: runId, status: 'stopping' });
      expect(posts(h, `/v1/runs/${runId}/stop`)).toHaveLength(1);
    });

    it('invalid input: the same key with a valid input reaches Hermes', async () => {
      const { h } = await withLedger();
      const key = nextId('key');
      const refused = await h.invoke({ capability_id: h.cap('run_start'), input: { body: { input: '' } }, idempotency_key: key });
      expect(refused.error?.code).toBe(`${PREFIX}invalid_input`);
      expect(h.sim.requests).toHaveLength(0);
      expectCompletedFresh(await start(h, { input: 'valid', sim_script: script.quick() }, key));
      expect(startPosts(h)).toHaveLength(1);
    });
  });

  describe('recorded and replayed', () => {
    it('an uncertain outcome (503): the same failed result is replayed, with no second POST', async () => {
      const { h } = await withLedger();
      h.sim.injectFault({ route: 'start', response: { status: 503 } });
      const key = nextId('key');
      const body = { input: 'maybe', sim_script: script.quick() };
      const first = await start(h, body, key);
      expect(first.status).toBe('failed');
      expect(first.error).toMatchObject({ code: `${PREFIX}remote_temporary`, category: 'temporary', retryable: false });
      expect(first.error?.details?.uncertain_outcome).toBe(true);
      expect(first.error?.details?.remote_status).toBe(503);
      expect(first.receipt?.http_status).toBe(503);

      const second = await start(h, body, key);
      expect(second).toEqual(replayOf(first, second.action_id));
      expect(second.receipt?.replayed).toBe(true);
      expect(startPosts(h)).toHaveLength(1);
      expect(h.sim.startCount()).toBe(0);
      // Recorded means recorded: another input under that key is a conflict.
      const other = await start(h, { input: 'other' }, key);
      expect(other.error?.code).toBe(`${PREFIX}idempotency_conflict`);
      expect(other.error?.details?.original_action_id).toBe(first.action_id);
      expect(startPosts(h)).toHaveLength(1);
    });

    it('a connection lost after the request was sent (uncertain transport failure) is replayed, with no second POST', async () => {
      const { h } = await withLedger();
      h.sim.injectFault({ route: 'start', destroy: true });
      const key = nextId('key');
      const body = { input: 'maybe', sim_script: script.quick() };
      const first = await start(h, body, key);
      expect(first.status).toBe('failed');
      expect(first.error?.code).toBe(`${PREFIX}transport`);
      expect(first.error?.details?.uncertain_outcome).toBe(true);
      const second = await start(h, body, key);
      expect(second).toEqual(replayOf(first, second.action_id));
      expect(startPosts(h)).toHaveLength(1);
    });

    it('run_approval is deduplicated: the same key twice makes one POST …/approval', async () => {
      const { h } = await withLedger();
      const runId = await h.startRun({ input: 'needs approval', sim_script: script.approval() });
      await waitForStatus(h, runId, 'waiting_for_approval');
      const key = nextId('key');
      const input = { run_id: runId, choice: 'once' };
      const first = await approve(h, input, key);
      expectCompletedFresh(first);
      expect(first.output).toEqual({ object: 'hermes.run.approval_response', run_id: runId, choice: 'once', resolved: 1 });
      const second = await approve(h, { ...input }, key);
      expect(second).toEqual(replayOf(first, second.action_id));
      expect(posts(h, `/v1/runs/${runId}/approval`)).toHaveLength(1);
    });

    it('run_stop is deduplicated: the same key twice makes one POST …/stop', async () => {
      const { h } = await withLedger();
      const runId = await h.startRun({ input: 'long', sim_script: script.long() });
      const key = nextId('key');
      const first = await stop(h, runId, key);
      expectCompletedFresh(first);
      const second = await stop(h, runId, key);
      expect(second).toEqual(replayOf(first, second.action_id));
      expect(posts(h, `/v1/runs/${runId}/stop`)).toHaveLength(1);
    });
  });

  describe('expired keys', () => {
    it('24 h + 1 ms later the same key with another input is no conflict and reaches the provider', async () => {
      const clock = { t: Date.now() };
      const store = await backend.create();
      const h = await harness({ connector: { ledger: store.ledger, now: () => clock.t } });
      const key = nextId('key');
      const claimedAt = clock.t;
      const first = await start(h, { input: 'first', sim_script: script.quick() }, key);
      expectCompletedFresh(first);

      clock.t = claimedAt + TTL - 1;
      const stillHeld = await start(h, { input: 'second', sim_script: script.quick() }, key);
      expect(stillHeld.error?.code).toBe(`${PREFIX}idempotency_conflict`);
      expect(startPosts(h)).toHaveLength(1);

      clock.t = claimedAt + TTL + 1;
      const second = await start(h, { input: 'second', sim_script: script.quick() }, key);
      expectCompletedFresh(second);
      expect(startPosts(h)).toHaveLength(2);
      expect(h.sim.startCount()).toBe(2);
      expect(runIdOf(second)).not.toBe(runIdOf(first));
      const record = await store.ledger.get({ capability_id: h.cap('run_start'), idempotency_key: key }, clock.t);
      expect(record?.action_id).toBe(second.action_id);
      expect(record?.state).toBe('done');
      expect(record?.result).toEqual(second);
    });

    it('24 h + 1 ms later the same key with the same input starts a new run instead of replaying', async () => {
      const clock = { t: Date.now() };
      const store = await backend.create();
      const h = await harness({ connector: { ledger: store.ledger, now: () => clock.t } });
      const key = nextId('key');
      const body = { input: 'again', sim_script: script.quick() };
      const first = await start(h, body, key);
      clock.t += TTL + 1;
      const second = await start(h, body, key);
      expectCompletedFresh(second);
      expect(runIdOf(second)).not.toBe(runIdOf(first));
      expect(h.sim.startCount()).toBe(2);
    });
  });

  it('the key is forwarded as Idempotency-Key on start, approval and stop', async () => {
    const { h } = await withLedger();
    const startKey = nextId('key');
    const runId = runIdOf(await start(h, { input: 'needs approval', sim_script: script.approval() }, startKey));
    await waitForStatus(h, runId, 'waiting_for_approval');
    const approvalKey = nextId('key');
    expectCompletedFresh(await approve(h, { run_id: runId, choice: 'deny' }, approvalKey));
    const stopKey = nextId('key');
    await stop(h, runId, stopKey);
    expect(startPosts(h).map((request) => request.headers['idempotency-key'])).toEqual([providerKeyOf(h.cap('run_start'), startKey)]);
    expect(posts(h, `/v1/runs/${runId}/approval`).map((request) => request.headers['idempotency-key'])).toEqual([
      providerKeyOf(h.cap('run_approval'), approvalKey),
    ]);
    expect(posts(h, `/v1/runs/${runId}/stop`).map((request) => request.headers['idempotency-key'])).toEqual([providerKeyOf(h.cap('run_stop'), stopKey)]);
  });
});
