/**
 * What the AIP event target makes of an ingress that cannot take the events now: back-pressure
 * (retry after 100 ms), unavailable (retry after 1 s), down, hanging, answering garbage or an
 * unsigned 200 (retry), and no lease to publish under (retry, nothing sent).
 */
import { describe, expect, it } from 'vitest';
import { signEnvelope } from '../../src/host/wire/envelope.js';
import { messageId } from '../../src/host/wire/ids.js';
import { rfc3339 } from '../../src/host/wire/time.js';
import { freshKey, gatewayParty } from '../helpers/aip-runtime/deployment.js';
import { startLoopbackServer } from '../helpers/aip-runtime/http.js';
import { capturedEvents, eventIngress, eventTarget, never, outboxEvents } from './events-support.js';

const events = () => outboxEvents(capturedEvents());

async function answering(status: number, body: string): Promise<{ url: string; close: () => Promise<void> }> {
  const server = await startLoopbackServer(async (incoming, response) => {
    incoming.resume();
    response.writeHead(status, { 'content-type': 'application/json' }).end(body);
  });
  return { url: `${server.url}/aip/v1/connector-events`, close: () => server.close() };
}

describe('the AIP event target when the ingress cannot take the events', () => {
  it('retries after 100 ms under capacity back-pressure', async () => {
    const ingress = await eventIngress();
    ingress.mode = 'capacity';
    await expect(eventTarget(ingress.url).deliver(events(), never)).resolves.toEqual({
      kind: 'retry',
      reason: 'status 503 connector_event.capacity',
      afterMs: 100,
    });
  });

  it('retries after 1 s when the ingress is unavailable', async () => {
    const ingress = await eventIngress();
    ingress.mode = 'unavailable';
    await expect(eventTarget(ingress.url).deliver(events(), never)).resolves.toEqual({
      kind: 'retry',
      reason: 'status 503 connector_event.unavailable',
      afterMs: 1000,
    });
  });

  it('retries when the replica is not (or no longer) registered under that lease', async () => {
    const ingress = await eventIngress({ leaseExpiresAt: Date.now() - 1 });
    await expect(eventTarget(ingress.url).deliver(events(), never)).resolves.toEqual({ kind: 'retry', reason: 'status 401 connector_event.not_authorized' });
  });

  it('retries when the ingress is down', async () => {
    const ingress = await eventIngress();
    ingress.mode = 'down';
    await expect(eventTarget(ingress.url).deliver(events(), never)).resolves.toMatchObject({ kind: 'retry' });
  });

  it('retries when the ingress hangs past the attempt timeout', async () => {
    const server = await startLoopbackServer(() => new Promise(() => {}));
    try {
      await expect(eventTarget(`${server.url}/aip/v1/connector-events`, undefined, 200).deliver(events(), never)).resolves.toEqual({
        kind: 'retry',
        reason: 'TimeoutError',
      });
    } finally {
      await server.close();
    }
  });

  it('retries on a 200 of garbage, and on a 200 event_stream another key signed', async () => {
    const garbage = await answering(200, '<html>ok</html>');
    const stranger = gatewayParty(freshKey());
    const reply = {
      aip_version: '1.0' as const,
      message_type: 'aip.discovery.v1.event_stream_response',
      message_id: messageId(),
      sent_at: rfc3339(Date.now()),
      body: { event_stream: { events: [] } },
    };
    const forged = await answering(200, signEnvelope(reply, stranger.key, stranger.principal).text);
    try {
      await expect(eventTarget(garbage.url).deliver(events(), never)).resolves.toEqual({
        kind: 'retry',
        reason: 'status 200, answer not signed by the gateway',
      });
      await expect(eventTarget(forged.url).deliver(events(), never)).resolves.toEqual({
        kind: 'retry',
        reason: 'status 200, answer not signed by the gateway',
      });
    } finally {
      await Promise.all([garbage.close(), forged.close()]);
    }
  });

  it('retries without sending while the host holds no lease', async () => {
    const ingress = await eventIngress();
    await expect(eventTarget(ingress.url, () => undefined).deliver(events(), never)).resolves.toEqual({
      kind: 'retry',
      reason: 'no valid control-plane lease to publish under',
      afterMs: 1000,
    });
    expect(ingress.records).toEqual([]);
  });

  it('ends promptly with a retry when the connector closes', async () => {
    const server = await startLoopbackServer(() => new Promise(() => {}));
    const closing = new AbortController();
    try {
      const delivery = eventTarget(`${server.url}/aip/v1/connector-events`).deliver(events(), closing.signal);
      closing.abort();
      await expect(delivery).resolves.toEqual({ kind: 'retry', reason: 'the connector is closing' });
    } finally {
      await server.close();
    }
  });
});
