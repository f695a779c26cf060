/**
 * Every batch the host's AIP event target builds is accepted by the runtime's event ingress:
 * real Hermes events with float timestamps, batches the limits split into several envelopes, an
 * event over 256 KiB sent with its data truncated; and a replay of delivered events is idempotent.
 */
import { describe, expect, it } from 'vitest';
import { eventId } from '../../src/host/provider-events.js';
import { capturedEvents, eventIngress, eventTarget, never, outboxEvents } from './events-support.js';

describe('the AIP event target against the event ingress', () => {
  it('delivers the captured lifecycle events, each an AIP event of the run with its Hermes timestamp', async () => {
    const ingress = await eventIngress();
    const events = outboxEvents(capturedEvents());
    await expect(eventTarget(ingress.url).deliver(events, never)).resolves.toEqual({ kind: 'delivered' });
    expect(ingress.records.map((record) => record.status)).toEqual([200]);
    const stored = ingress.stored.get(eventId(events[0]!.id))!;
    expect(stored['kind']).toBe('hermes.message.delta');
    // 1796032842.009136 s, to the microsecond.
    expect(stored['occurred_at']).toBe('2026-11-30T10:00:42.009136Z');
    expect(stored['data']).toMatchObject({
      tenant_id: 'tenant-acme',
      endpoint_id: 'local',
      sequence: 1,
      hermes: { event: 'message.delta', data: { delta: 'Checking ' } },
    });
    expect(ingress.stored.size).toBe(events.length);
  });

  it('accepts a replay of delivered events as the same events', async () => {
    const ingress = await eventIngress();
    const events = outboxEvents(capturedEvents());
    const target = eventTarget(ingress.url);
    await target.deliver(events, never);
    const first = structuredClone([...ingress.stored.values()]);
    await expect(target.deliver(events.slice(2), never)).resolves.toEqual({ kind: 'delivered' });
    expect([...ingress.stored.values()]).toEqual(first);
  });

  it('sends 100 events of 60 KiB as envelopes under 4 MiB, in order', async () => {
    const ingress = await eventIngress();
    const big = Array.from({ length: 100 }, (_, index) => ({
      event: 'message.delta',
      data: { timestamp: 1796032842.0091949 + index, delta: 'x'.repeat(60 * 1024) },
    }));
    await expect(eventTarget(ingress.url).deliver(outboxEvents(big), never)).resolves.toEqual({ kind: 'delivered' });
    expect(ingress.records.length).toBeGreaterThan(1);
    expect(ingress.records.every((record) => record.status === 200)).toBe(true);
    expect(ingress.records.flatMap((record) => record.eventIds)).toEqual(outboxEvents(big).map((event) => eventId(event.id)));
  });

  it('truncates the data of an event over 256 KiB, keeping its size and hash', async () => {
    const ingress = await eventIngress();
    const huge = outboxEvents([{ event: 'tool.completed', data: { timestamp: 1796032842.5, output: 'y'.repeat(300 * 1024) } }]);
    await expect(eventTarget(ingress.url).deliver(huge, never)).resolves.toEqual({ kind: 'delivered' });
    const hermes = (ingress.stored.get(eventId(huge[0]!.id))!['data'] as Record<string, any>)['hermes'];
    expect(hermes.data).toBeUndefined();
    expect(hermes.data_truncated).toMatchObject({ bytes: expect.any(Number), sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
  });
});
