/**
 * The event ingress refuses what the reference refuses: a tampered envelope (a body byte changed,
 * another key's signature, a channel the manifest does not declare, an unknown field in
 * `security.connector_event`), and a changed payload under a delivered event id, which the
 * target reports as `refused`.
 */
import { describe, expect, it } from 'vitest';
import { request } from 'undici';
import { type Envelope, signEnvelope } from '../../src/host/wire/envelope.js';
import { freshKey } from '../helpers/aip-runtime/deployment.js';
import { startLoopbackServer } from '../helpers/aip-runtime/http.js';
import { capturedEvents, eventIngress, eventTarget, hostKey, hostPrincipal, never, outboxEvents, publishingWith } from './events-support.js';

/** The envelope text the target sends, caught by a server that answers 503 (so the target only retries). */
async function sentEnvelope(publishing = publishingWith()): Promise<string> {
  let caught = '';
  const server = await startLoopbackServer(async (incoming, response) => {
    for await (const part of incoming) caught += String(part);
    response.writeHead(503).end();
  });
  try {
    await eventTarget(`${server.url}/aip/v1/connector-events`, () => publishing).deliver(outboxEvents(capturedEvents()), never);
  } finally {
    await server.close();
  }
  return caught;
}

async function postTo(url: string, text: string): Promise<{ status: number; code: string | undefined }> {
  const response = await request(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text });
  const answer = (await response.body.json()) as { body?: { error?: { error?: { code?: string } } } };
  return { status: response.statusCode, code: answer.body?.error?.error?.code };
}

/** The envelope with `change` applied, signed again by the host key (only the ingress's route checks can catch it). */
function resigned(text: string, change: (envelope: Envelope) => void): string {
  const envelope = JSON.parse(text) as Envelope;
  change(envelope);
  return signEnvelope(envelope, hostKey, hostPrincipal).text;
}

describe('the event ingress refuses tampered envelopes', () => {
  it('accepts the envelope as sent', async () => {
    const ingress = await eventIngress();
    await expect(postTo(ingress.url, await sentEnvelope())).resolves.toEqual({ status: 200, code: undefined });
  });

  it('refuses a body byte changed after signing', async () => {
    const ingress = await eventIngress();
    const tampered = (await sentEnvelope()).replace('Checking ', 'Checkinf ');
    await expect(postTo(ingress.url, tampered)).resolves.toEqual({ status: 401, code: 'connector_event.not_authorized' });
  });

  it('refuses an envelope signed by another key', async () => {
    const ingress = await eventIngress();
    const envelope = JSON.parse(await sentEnvelope()) as Envelope;
    const forged = signEnvelope(envelope, freshKey(), hostPrincipal).text;
    await expect(postTo(ingress.url, forged)).resolves.toEqual({ status: 401, code: 'connector_event.not_authorized' });
  });

  it('refuses a channel the admitted manifest does not declare', async () => {
    const ingress = await eventIngress();
    await expect(postTo(ingress.url, await sentEnvelope(publishingWith({ channel_id: 'hermes.other' })))).resolves.toEqual({
      status: 401,
      code: 'connector_event.not_authorized',
    });
  });

  it('refuses an unknown field in security.connector_event', async () => {
    const ingress = await eventIngress();
    const text = resigned(await sentEnvelope(), (envelope) => {
      (envelope.security!['connector_event'] as Record<string, unknown>)['fence_token'] = 'x';
    });
    await expect(postTo(ingress.url, text)).resolves.toEqual({ status: 401, code: 'connector_event.not_authorized' });
  });
});

describe('a changed payload under a delivered event id', () => {
  it('is refused by the ingress, and the target gives the delivery up', async () => {
    const ingress = await eventIngress();
    const target = eventTarget(ingress.url);
    const [first] = outboxEvents(capturedEvents());
    await expect(target.deliver([first!], never)).resolves.toEqual({ kind: 'delivered' });
    const changed = { ...first!, event: { ...first!.event, data: { ...first!.event.data, delta: 'Something else' } } };
    await expect(target.deliver([changed], never)).resolves.toEqual({ kind: 'refused', reason: 'status 400 connector_event.idempotency_conflict' });
  });
});
