/**
 * A resend of an event builds the same AIP event content, even when Hermes' timestamp is a little
 * ahead of our clock: the ingress compares a replayed event id's content and refuses a changed one as
 * `connector_event.idempotency_conflict`. Only a timestamp beyond the ingress's future skew (now + 5 min)
 * is replaced by now.
 */
import { describe, expect, it } from 'vitest';
import { createAipEventTarget } from '../../src/host/event-publisher.js';
import { aipEvent, type AipEvent, occurredAt } from '../../src/host/provider-events.js';
import { wireJson } from '../../src/host/wire/json.js';
import { INSTANCE_ID } from '../helpers/aip-runtime/deployment.js';
import { eventIngress, hostKey, never, outboxEvents, publishingWith } from './events-support.js';

const NOW_MS = Date.UTC(2026, 11, 3, 12, 0, 0);
const aheadBy = (ms: number) => (NOW_MS + ms) / 1000;
const measure = (event: AipEvent) => Buffer.byteLength(wireJson(event));

describe('occurred_at of an event ahead of our clock', () => {
  it('keeps a timestamp up to 5 minutes ahead, so attempts a second apart build byte-identical events', () => {
    const [event] = outboxEvents([{ event: 'run.completed', data: { event: 'run.completed', timestamp: aheadBy(90_000), output: 'ok' } }]);
    const first = wireJson(aipEvent(event!, NOW_MS, measure));
    const resent = wireJson(aipEvent(event!, NOW_MS + 1_000, measure));
    expect(resent).toBe(first);
    expect(JSON.parse(first).occurred_at).toBe('2026-12-03T12:01:30Z');
  });

  it('replaces a timestamp beyond now + 5 minutes, which the ingress would refuse, by now', () => {
    expect(occurredAt({ timestamp: aheadBy(5 * 60_000 + 1) }, NOW_MS)).toBe('2026-12-03T12:00:00Z');
    expect(occurredAt({ timestamp: aheadBy(5 * 60_000) }, NOW_MS)).toBe('2026-12-03T12:05:00Z');
  });

  it('is accepted again by the ingress when resent later (no idempotency conflict)', async () => {
    const ingress = await eventIngress();
    const events = outboxEvents([{ event: 'run.completed', data: { event: 'run.completed', timestamp: (Date.now() + 60_000) / 1000 } }]);
    let clock = Date.now();
    const target = createAipEventTarget({ endpoint: ingress.url, instanceId: INSTANCE_ID, key: hostKey, publishing: () => publishingWith(), now: () => clock });
    await expect(target.deliver(events, never)).resolves.toEqual({ kind: 'delivered' });
    clock += 2_000;
    await expect(target.deliver(events, never)).resolves.toEqual({ kind: 'delivered' });
    expect(ingress.records.map((record) => record.status)).toEqual([200, 200]);
  });
});
