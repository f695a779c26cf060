/**
 * Webhooks end to end: a connector on the simulator with the journal and two webhooks (every event, and
 * lifecycle only) delivers the events of text, approval and stopped runs to loopback receivers that verify
 * each delivery with `standardwebhooks`' Webhook.verify. Every journaled event arrives verified, in order
 * per run, under the run's tenant and endpoint; a retried delivery keeps its webhook-id; the lifecycle
 * receiver gets only lifecycle events; a body changed after signing fails verification.
 */
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import type { AipActionResult, HermesSseEvent, RunEventsOutput } from '../../src/contract/aip.js';
import { eventually, grantFor, harnessFactory, nextId, type Harness, script } from '../helpers/harness.js';
import { DURABLE_BACKENDS } from '../helpers/ledgers.js';
import { type Delivery, secretFile, startReceiver } from '../helpers/webhooks.js';

const TENANT = { tenantId: 'tenant-a' };
const LIFECYCLE = new Set(['approval.request', 'approval.responded', 'run.completed', 'run.failed', 'run.cancelled', 'run.interrupted']);
const harness = harnessFactory({ simulator: { streamLookupMs: 100 } });

interface Payload {
  type: string;
  data: { tenant_id: string | null; endpoint_id: string; run_id: string; sequence: number; event: HermesSseEvent };
}

const payloadsOf = (deliveries: Delivery[], runId: string) =>
  deliveries.map((delivery) => delivery.verified as Payload).filter((payload) => payload?.data.run_id === runId);

async function journaledEvents(h: Harness, runId: string): Promise<HermesSseEvent[]> {
  const result: AipActionResult = await h.invoke({ capability_id: h.cap('run_events'), input: { run_id: runId } }, TENANT);
  return (result.output as RunEventsOutput).events;
}

async function approve(h: Harness, runId: string): Promise<void> {
  await eventually(() => (h.sim.run(runId)?.events ?? []).some((event) => event['event'] === 'approval.request') || undefined, 'the approval request');
  const input = { run_id: runId, choice: 'once' };
  const result = await h.invoke({ capability_id: h.cap('run_approval'), input, idempotency_key: nextId('key') }, { ...TENANT, approval: grantFor(input) });
  expect(result.status, JSON.stringify(result.error)).toBe('completed');
}

async function stop(h: Harness, runId: string): Promise<void> {
  const input = { run_id: runId };
  const result = await h.invoke({ capability_id: h.cap('run_stop'), input, idempotency_key: nextId('key') }, { ...TENANT, approval: grantFor(input) });
  expect(result.status, JSON.stringify(result.error)).toBe('completed');
}

describe.each(DURABLE_BACKENDS)('webhooks end to end on $name', (backend) => {
  it('delivers every journaled event of text, approval and stopped runs, verified, in order, once per id', async () => {
    const all = secretFile();
    const lifecycle = secretFile();
    // The first delivery is answered 503: its retry must carry the same webhook-id.
    const allReceiver = await startReceiver(all.secret, (response, index) => void response.writeHead(index === 0 ? 503 : 204).end());
    const lifecycleReceiver = await startReceiver(lifecycle.secret);
    const store = await backend.create();
    const h = await harness({
      connector: {
        ledger: store.ledger,
        journal: {},
        webhooks: [
          { url: allReceiver.url, secretFile: all.path, allowLoopbackHttp: true },
          { url: lifecycleReceiver.url, secretFile: lifecycle.path, events: 'lifecycle', allowLoopbackHttp: true },
        ],
      },
    });
    try {
      const text = await h.startRun({ input: 'text', sim_script: script.quick() }, { context: TENANT });
      const approval = await h.startRun({ input: 'approval', sim_script: script.approval() }, { context: TENANT });
      await approve(h, approval);
      const stopped = await h.startRun({ input: 'stop', sim_script: script.long() }, { context: TENANT });
      await eventually(() => (h.sim.run(stopped)?.events.length ?? 0) > 0 || undefined, 'the long run started');
      await stop(h, stopped);

      for (const runId of [text, approval, stopped]) {
        const records = await eventually(async () => {
          const found = await h.connector.deliveries(runId, { tenantId: 'tenant-a' });
          return found.length === 2 && found.every((record) => record.state === 'delivered') ? found : undefined;
        }, `both deliveries of ${runId} settled`);
        expect(records.map((record) => record.state)).toEqual(['delivered', 'delivered']);
        const journaled = await journaledEvents(h, runId);
        expect(journaled.length).toBeGreaterThan(1);

        const received = payloadsOf(allReceiver.deliveries, runId);
        const firsts = [...new Map(received.map((payload) => [payload.data.sequence, payload])).values()];
        expect(firsts.map((payload) => payload.data.event)).toEqual(journaled);
        expect(firsts.map((payload) => payload.data.sequence)).toEqual(journaled.map((_, index) => index + 1));
        expect(received.map((payload) => payload.data.sequence)).toEqual([...received.map((payload) => payload.data.sequence)].sort((a, b) => a - b));
        for (const payload of received) {
          expect(payload.type).toBe(`hermes.${payload.data.event.event}`);
          expect(payload.data).toMatchObject({ tenant_id: 'tenant-a', endpoint_id: 'local', run_id: runId });
        }

        const lifecycleNames = payloadsOf(lifecycleReceiver.deliveries, runId).map((payload) => payload.data.event.event);
        expect(lifecycleNames).toEqual(journaled.map((event) => event.event).filter((name) => LIFECYCLE.has(name)));
      }
      expect(payloadsOf(lifecycleReceiver.deliveries, approval).map((payload) => payload.data.event.event)).toEqual([
        'approval.request',
        'approval.responded',
        'run.completed',
      ]);
      const stoppedEnd = payloadsOf(allReceiver.deliveries, stopped).at(-1)?.data.event.event;
      expect(['run.cancelled', 'run.interrupted', 'run.failed']).toContain(stoppedEnd);

      for (const delivery of [...allReceiver.deliveries, ...lifecycleReceiver.deliveries]) expect(delivery.error).toBeUndefined();
      // Each webhook-id names one event: a retry repeats the id with the same body.
      const bodies = new Map<string, string>();
      for (const delivery of allReceiver.deliveries) {
        const id = delivery.headers['webhook-id']!;
        const body = JSON.stringify((delivery.verified as Payload).data);
        expect(bodies.get(id) ?? body).toBe(body);
        bodies.set(id, body);
      }
      const refusedId = allReceiver.deliveries[0]!.headers['webhook-id'];
      expect(allReceiver.deliveries.filter((delivery) => delivery.headers['webhook-id'] === refusedId)).toHaveLength(2);
      expect(bodies.size).toBe(allReceiver.deliveries.length - 1);
    } finally {
      await allReceiver.close();
      await lifecycleReceiver.close();
    }
  });

  it('a delivery changed after signing fails the receiver’s verification', async () => {
    const secret = secretFile();
    const receiver = await startReceiver(secret.secret);
    const store = await backend.create();
    const h = await harness({
      connector: { ledger: store.ledger, journal: {}, webhooks: [{ url: receiver.url, secretFile: secret.path, allowLoopbackHttp: true }] },
    });
    try {
      const runId = await h.startRun({ input: 'text', sim_script: script.quick('signed') }, { context: TENANT });
      await eventually(async () => {
        const [record] = await h.connector.deliveries(runId, { tenantId: 'tenant-a' });
        return record?.state === 'delivered' || undefined;
      }, 'the delivery settled');
      const delivery = receiver.deliveries.at(-1)!;
      expect(delivery.error).toBeUndefined();
      const verifier = new Webhook(secret.secret);
      expect(verifier.verify(delivery.body, delivery.headers)).toEqual(delivery.verified);
      const tampered = delivery.body.replace('"signed"', '"forged"');
      expect(tampered).not.toBe(delivery.body);
      expect(() => verifier.verify(tampered, delivery.headers)).toThrow();
      const otherId = { ...delivery.headers, 'webhook-id': `${delivery.headers['webhook-id']}x` };
      expect(() => verifier.verify(delivery.body, otherId)).toThrow();
    } finally {
      await receiver.close();
    }
  });
});
