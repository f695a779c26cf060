/**
 * The outbox's deliverer against the simulator over real HTTP, a real loopback receiver and real
 * SQLite / PostgreSQL ledgers: every journaled event reaches the target in order with a stable id;
 * failures are retried with back-off, and what cannot be delivered is given up with its evidence.
 */
import { describe, expect, it } from 'vitest';
import type { DeliveryOptions, DeliveryRecord, DeliveryTarget } from 'aip-connector-hermes-agent';
import { captureLogger } from '../helpers/capture-logger.js';
import { API_KEY, harnessFactory, script, type Harness } from '../helpers/harness.js';
import { deliveryEnded, httpTarget, receivedFor, startReceiver, type Receiver } from '../helpers/delivery-target.js';
import { DURABLE_BACKENDS } from '../helpers/ledgers.js';

const harness = harnessFactory({ simulator: { streamLookupMs: 100 } });
const simulatedNames = (h: Harness, runId: string) => (h.sim.run(runId)?.events ?? []).map((event) => event['event']);

describe.each(DURABLE_BACKENDS)('outbox deliverer on $name', (backend) => {
  const delivering = async (delivery: DeliveryOptions = {}, target?: (receiver: Receiver) => DeliveryTarget) => {
    const store = await backend.create();
    const receiver = await startReceiver();
    const { logger, lines, raw } = captureLogger();
    const h = await harness({
      connector: {
        ledger: store.ledger,
        logger,
        journal: { leaseMs: 200 },
        delivery: { leaseMs: 200, ...delivery },
        eventTargets: [target ? target(receiver) : httpTarget(receiver.url)],
      },
    });
    return { h, receiver, lines, raw };
  };

  it('delivers every event of a run once, in journal order, each with a stable id, and records the delivery as delivered', async () => {
    const { h, receiver } = await delivering();
    const runId = await h.startRun({ input: 'hello', sim_script: script.quick() });
    const record = await deliveryEnded(h.connector, runId);
    const received = receivedFor(receiver, runId);
    expect(received.map((event) => event.event)).toEqual(simulatedNames(h, runId));
    expect(received.map((event) => event.sequence)).toEqual(received.map((_, index) => index + 1));
    expect(new Set(received.map((event) => event.id)).size).toBe(received.length);
    for (const { id } of received) expect(id).toMatch(/^evt_[0-9a-f]{32}$/);
    expect(record).toMatchObject({
      state: 'delivered',
      target_id: 'receiver',
      delivered_through: received.length,
      queued_through: received.length,
      attempts: 0,
    });
  });

  it('passes over the events a target does not accept, and batches the others up to its maxBatch', async () => {
    const { h, receiver } = await delivering({}, ({ url }) => httpTarget(url, { maxBatch: 1, accepts: (event) => event.event !== 'message.delta' }));
    const runId = await h.startRun({ input: 'hello', sim_script: script.quick() });
    const record = await deliveryEnded(h.connector, runId);
    const expected = simulatedNames(h, runId).filter((name) => name !== 'message.delta');
    expect(receivedFor(receiver, runId).map((event) => event.event)).toEqual(expected);
    expect(receiver.requests).toBe(expected.length);
    expect(record.delivered_through).toBe(simulatedNames(h, runId).length);
  });

  it('retries after a 5xx, garbage and a hanging attempt, then delivers everything once', async () => {
    const { h, receiver, lines, raw } = await delivering({ attemptTimeoutMs: 200 });
    receiver.answers.push(503, 'garbage', 'hang');
    const runId = await h.startRun({ input: 'hello', sim_script: script.quick() });
    const record = await deliveryEnded(h.connector, runId, 2000);
    expect(record.state).toBe('delivered');
    expect(receivedFor(receiver, runId).map((event) => event.event)).toEqual(simulatedNames(h, runId));
    expect(record).toMatchObject({ attempts: 0, last_error: null, first_failure_at: null });
    const retries = lines.filter((line) => line['msg'] === 'run event delivery failed; retrying');
    expect(retries.map((line) => [line['attempts'], line['reason']])).toEqual([
      [1, 'HTTP 503'],
      [2, 'the receiver answered with no acknowledgement'],
      [3, 'attempt_timeout'],
    ]);
    expect(retries.every((line) => line['level'] === 40 && line['target_id'] === 'receiver')).toBe(true);
    expect(raw()).not.toContain(API_KEY);
  });

  it('gives a delivery up at once when the target refuses it, with the reason and the undelivered range', async () => {
    const { h, receiver, lines } = await delivering();
    receiver.otherwise = 422;
    const runId = await h.startRun({ input: 'hello', sim_script: script.quick() });
    const record = await deliveryEnded(h.connector, runId);
    expect(record).toMatchObject<Partial<DeliveryRecord>>({ state: 'given_up', given_up_reason: 'refused', last_error: 'HTTP 422', delivered_through: 0 });
    expect(receiver.requests).toBe(1);
    expect(lines.find((line) => line['msg'] === 'run event delivery given up')).toMatchObject({ given_up_reason: 'refused', undelivered_after_sequence: 0 });
  });

  it('gives a delivery up once it has failed for maxAgeMs, keeping the last error as evidence', async () => {
    const { h, receiver } = await delivering({ maxAgeMs: 1000 });
    receiver.otherwise = 503;
    const runId = await h.startRun({ input: 'hello', sim_script: script.quick() });
    const record = await deliveryEnded(h.connector, runId);
    expect(record).toMatchObject({ state: 'given_up', given_up_reason: 'max_age', last_error: 'HTTP 503', delivered_through: 0 });
    expect(record.first_failure_at).not.toBeNull();
    expect(receiver.received).toEqual([]);
    expect(receiver.requests).toBeGreaterThanOrEqual(2);
  });

  it('retries a target that is down (connection refused) and gives it up at maxAgeMs, saying so', async () => {
    const down = await startReceiver();
    await down.close();
    const { h } = await delivering({ maxAgeMs: 1000 }, () => httpTarget(down.url));
    const runId = await h.startRun({ input: 'hello', sim_script: script.quick() });
    const record = await deliveryEnded(h.connector, runId);
    expect(record).toMatchObject({ state: 'given_up', given_up_reason: 'max_age', delivered_through: 0 });
    expect(record.last_error).toMatch(/^unreachable: /);
  });
});
