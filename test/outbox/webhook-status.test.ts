/**
 * What each answer of a receiver makes of a delivery, per Standard Webhooks: 2xx delivered; 410 Gone
 * refused (stop); every other status, 3xx (never followed), 4xx and 5xx, a retry, after the
 * receiver's Retry-After (bounded) when it sent one. Real loopback receivers throughout.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_WEBHOOK_RETRY_AFTER_MS, createWebhookTargets, type WebhookTargets } from '../../src/outbox/webhook.js';
import type { DeliveryTarget } from '../../src/outbox/types.js';
import { type FaultServer, redirectTo, startFaultServer } from '../helpers/fault-server.js';
import { answerStatus, hermesEvent, outboxEvent, type Receiver, resolveWebhooks, secretFile, startReceiver } from '../helpers/webhooks.js';

let receiver: Receiver | undefined;
let faults: FaultServer | undefined;
let webhooks: WebhookTargets | undefined;

afterEach(async () => {
  await webhooks?.close();
  await receiver?.close();
  await faults?.close();
});

function targetFor(url: string, path: string, now?: () => number): DeliveryTarget {
  webhooks = createWebhookTargets(resolveWebhooks([{ url, secretFile: path, allowLoopbackHttp: true }]), now ? { now } : {});
  return webhooks.targets[0] as DeliveryTarget;
}

async function deliverOnceAnswered(status: number, headers: Record<string, string> = {}, now?: () => number) {
  const { path, secret } = secretFile();
  receiver = await startReceiver(secret, answerStatus(status, headers, 'thanks'));
  const outcome = await targetFor(receiver.url, path, now).deliver([outboxEvent(1, hermesEvent('run.completed'))], new AbortController().signal);
  expect(receiver.deliveries).toHaveLength(1);
  expect(receiver.deliveries[0]?.error).toBeUndefined();
  return outcome;
}

describe('a receiver’s status decides the outcome', () => {
  it.each([200, 201, 202, 204, 299])('%i is delivered', async (status) => {
    expect(await deliverOnceAnswered(status)).toEqual({ kind: 'delivered' });
  });

  it('410 Gone is refused: the receiver wants no more deliveries', async () => {
    expect(await deliverOnceAnswered(410)).toEqual({ kind: 'refused', reason: 'the receiver answered 410 Gone: it wants no more deliveries' });
  });

  it.each([400, 401, 403, 404, 408, 413, 422, 429, 500, 502, 503, 504])('%i is retried', async (status) => {
    expect(await deliverOnceAnswered(status)).toEqual({ kind: 'retry', reason: `the receiver answered HTTP ${status}` });
  });

  it('a redirect is retried and never followed', async () => {
    const { path } = secretFile();
    faults = await startFaultServer(redirectTo(307, '/elsewhere'));
    const outcome = await targetFor(`${faults.url}/hook`, path).deliver([outboxEvent(1, hermesEvent('run.completed'))], new AbortController().signal);
    expect(outcome).toEqual({ kind: 'retry', reason: 'the receiver answered HTTP 307' });
    expect(faults.requests.map((request) => request.target)).toEqual(['/hook']);
  });
});

describe('Retry-After', () => {
  it('in seconds becomes afterMs', async () => {
    expect(await deliverOnceAnswered(429, { 'Retry-After': '7' })).toEqual({ kind: 'retry', reason: 'the receiver answered HTTP 429', afterMs: 7000 });
  });

  it('as an HTTP date becomes the time until then, by the target’s clock', async () => {
    // A whole second near the real time, which the receiver checks the webhook-timestamp against.
    const now = Math.floor(Date.now() / 1000) * 1000;
    const outcome = await deliverOnceAnswered(503, { 'Retry-After': new Date(now + 90_000).toUTCString() }, () => now);
    expect(outcome).toEqual({ kind: 'retry', reason: 'the receiver answered HTTP 503', afterMs: 90_000 });
  });

  it('is cut to an hour', async () => {
    expect(await deliverOnceAnswered(503, { 'Retry-After': '86400' })).toMatchObject({ afterMs: MAX_WEBHOOK_RETRY_AFTER_MS });
  });

  it('that is not a number or a date is no hint at all', async () => {
    expect(await deliverOnceAnswered(503, { 'Retry-After': 'soon' })).toEqual({ kind: 'retry', reason: 'the receiver answered HTTP 503' });
  });
});
