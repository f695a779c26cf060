/**
 * The signing secret, and the URL's path and query (which may hold a token), never appear in a log
 * line, an outcome, a configuration error, JSON or util.inspect of the resolved config or the targets.
 */
import { inspect } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../src/config.js';
import { createWebhookTargets, type WebhookTargets } from '../../src/outbox/webhook.js';
import { captureLogger } from '../helpers/capture-logger.js';
import { caught } from '../helpers/fixtures.js';
import { answerStatus, hermesEvent, outboxEvent, type Receiver, secretFile, startReceiver, webhookOptions } from '../helpers/webhooks.js';

let receiver: Receiver | undefined;
let webhooks: WebhookTargets | undefined;

afterEach(async () => {
  await webhooks?.close();
  await receiver?.close();
});

/** What must never show: the secret, its key part, and the URL's path and token. */
function forbidden(secret: string): string[] {
  return [secret, secret.slice('whsec_'.length), 'path-canary-q', '/hooks/hermes'];
}

describe('webhook secrecy', () => {
  it('keeps the secret and the URL path out of logs, outcomes, JSON and util.inspect', async () => {
    const { path, secret } = secretFile();
    receiver = await startReceiver(secret);
    const { logger, raw } = captureLogger();
    const config = resolveConfig(webhookOptions([{ url: receiver.url, secretFile: path, allowLoopbackHttp: true }]));
    webhooks = createWebhookTargets(config.webhooks, { logger });
    const target = webhooks.targets[0];
    if (!target) throw new Error('no target');
    const outcomes = [];
    for (const status of [204, 500, 410]) {
      receiver.answer(answerStatus(status));
      outcomes.push(await target.deliver([outboxEvent(outcomes.length + 1, hermesEvent('run.completed'))], new AbortController().signal));
    }
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(['delivered', 'retry', 'refused']);
    expect(receiver.deliveries.every((delivery) => delivery.error === undefined)).toBe(true);
    expect(raw()).toContain('webhook delivery attempt');
    const shown = [raw(), JSON.stringify(outcomes), JSON.stringify(config.webhooks), inspect(config, { depth: 10 }), inspect(webhooks, { depth: 10 })];
    shown.push(inspect(target, { depth: 10, showHidden: true }), JSON.stringify(target));
    for (const text of shown) for (const secretText of forbidden(secret)) expect(text).not.toContain(secretText);
  });

  it('a configuration error says what is wrong without the URL or the secret', () => {
    const { path, secret } = secretFile(0o640);
    const error = caught(() => resolveConfig(webhookOptions([{ url: 'https://hooks.example.com/hooks/hermes?token=path-canary-q', secretFile: path }])));
    expect((error as Error).message).toBe('webhooks[0] secretFile: the file must be owner-only (chmod 600)');
    for (const text of [(error as Error).message, inspect(error), JSON.stringify(error)]) {
      for (const secretText of forbidden(secret)) expect(text).not.toContain(secretText);
    }
  });
});
