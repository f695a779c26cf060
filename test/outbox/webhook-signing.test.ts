/**
 * Every delivery verifies with the `standardwebhooks` package on a real loopback receiver: the
 * headers, the signature over id, timestamp and body, and the payload's type, time, tenant,
 * endpoint, run, sequence and event. A retry sends the same webhook-id; a tampered body fails.
 */
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { USER_AGENT } from '../../src/internal/package-info.js';
import { createWebhookTargets, type WebhookTargets } from '../../src/outbox/webhook.js';
import { answerStatus, hermesEvent, outboxEvent, type Receiver, resolveWebhooks, secretFile, startReceiver } from '../helpers/webhooks.js';

let receiver: Receiver | undefined;
let webhooks: WebhookTargets | undefined;

afterEach(async () => {
  await webhooks?.close();
  await receiver?.close();
});

async function setUp(events: 'all' | 'lifecycle' = 'all') {
  const { path, secret } = secretFile();
  receiver = await startReceiver(secret);
  webhooks = createWebhookTargets(resolveWebhooks([{ url: receiver.url, secretFile: path, allowLoopbackHttp: true, events }]));
  const target = webhooks.targets[0];
  if (!target) throw new Error('no target');
  return { receiver, target, secret };
}

const RUN_EVENTS = [
  hermesEvent('message.delta', { delta: 'Hel' }),
  hermesEvent('tool.started', { tool: 'terminal', preview: 'ls' }),
  hermesEvent('approval.request', { command: 'rm -rf /tmp/x', choices: ['once', 'session', 'always', 'deny'] }),
  hermesEvent('approval.responded', { choice: 'once', resolved: 1 }),
  hermesEvent('run.completed', { output: 'done', usage: { input_tokens: 1, output_tokens: 2, total_tokens: 3 } }),
];

describe('webhook deliveries verify with standardwebhooks', () => {
  it('signs every event so that Webhook.verify accepts it, with the Standard Webhooks headers and payload', async () => {
    const { receiver, target } = await setUp();
    for (const [index, event] of RUN_EVENTS.entries()) {
      expect(target.accepts(event)).toBe(true);
      expect(await target.deliver([outboxEvent(index + 1, event)], new AbortController().signal)).toEqual({ kind: 'delivered' });
    }
    expect(receiver.deliveries).toHaveLength(RUN_EVENTS.length);
    for (const [index, delivery] of receiver.deliveries.entries()) {
      expect(delivery.error).toBeUndefined();
      expect(delivery.headers['webhook-id']).toBe(`evt_${index + 1}`);
      expect(delivery.headers['webhook-timestamp']).toMatch(/^\d{10}$/);
      expect(delivery.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
      expect(delivery.headers['content-type']).toBe('application/json');
      expect(delivery.headers['user-agent']).toBe(USER_AGENT);
      const event = RUN_EVENTS[index];
      expect(delivery.verified).toEqual({
        type: `hermes.${event?.event}`,
        timestamp: new Date(1_790_000_000_250).toISOString(),
        data: { tenant_id: 'tenant-a', endpoint_id: 'ep1', run_id: 'run-1', sequence: index + 1, event },
      });
    }
  });

  it('sends the path and query of the URL as configured', async () => {
    const { receiver, target } = await setUp();
    await target.deliver([outboxEvent(1, RUN_EVENTS[0]!)], new AbortController().signal);
    expect(receiver.deliveries[0]?.target).toBe('/hooks/hermes?token=path-canary-q');
  });

  it('uses the send time as the payload time when the Hermes event has no usable timestamp', async () => {
    const { receiver, target } = await setUp();
    const event = { event: 'message.delta', data: { delta: 'x', timestamp: 'soon' } };
    await target.deliver([outboxEvent(1, event)], new AbortController().signal);
    const sentAt = Number(receiver.deliveries[0]?.headers['webhook-timestamp']) * 1000;
    const timestamp = Date.parse((receiver.deliveries[0]?.verified as { timestamp: string }).timestamp);
    expect(timestamp - sentAt).toBeGreaterThanOrEqual(0);
    expect(timestamp - sentAt).toBeLessThan(1000);
  });

  it('sends the same webhook-id on a retry, each attempt signed anew', async () => {
    const { receiver, target } = await setUp();
    receiver.answer((response, index) => answerStatus(index === 0 ? 503 : 200)(response, index, undefined as never));
    const event = outboxEvent(7, RUN_EVENTS[4]!, 'msg_run-1_7');
    expect((await target.deliver([event], new AbortController().signal)).kind).toBe('retry');
    expect(await target.deliver([event], new AbortController().signal)).toEqual({ kind: 'delivered' });
    const [first, second] = receiver.deliveries;
    expect(first?.headers['webhook-id']).toBe('msg_run-1_7');
    expect(second?.headers['webhook-id']).toBe('msg_run-1_7');
    expect(first?.error).toBeUndefined();
    expect(second?.error).toBeUndefined();
    expect(second?.body).toBe(first?.body);
  });

  it('a tampered body, id or timestamp fails the receiver’s verification (the receiver checks for real)', async () => {
    const { receiver, target, secret } = await setUp();
    await target.deliver([outboxEvent(1, RUN_EVENTS[4]!)], new AbortController().signal);
    const delivery = receiver.deliveries[0]!;
    const verifier = new Webhook(secret);
    expect(() => verifier.verify(delivery.body.replace('"done"', '"evil"'), delivery.headers)).toThrow('No matching signature found');
    expect(() => verifier.verify(delivery.body, { ...delivery.headers, 'webhook-id': 'evt_2' })).toThrow('No matching signature found');
    const earlier = String(Number(delivery.headers['webhook-timestamp']) - 1);
    expect(() => verifier.verify(delivery.body, { ...delivery.headers, 'webhook-timestamp': earlier })).toThrow('No matching signature found');
    expect(() => new Webhook(secretFile().secret).verify(delivery.body, delivery.headers)).toThrow('No matching signature found');
  });

  it('lifecycle webhooks accept approvals and terminal events only', async () => {
    const { target } = await setUp('lifecycle');
    const accepted = ['approval.request', 'approval.responded', 'run.completed', 'run.failed', 'run.cancelled', 'run.interrupted'];
    const passed = ['message.delta', 'tool.started', 'tool.completed', 'reasoning.available', 'run.steered', 'subagent.start'];
    for (const name of accepted) expect(target.accepts(hermesEvent(name)), name).toBe(true);
    for (const name of passed) expect(target.accepts(hermesEvent(name)), name).toBe(false);
  });
});
