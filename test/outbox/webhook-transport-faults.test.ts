/**
 * Receivers that are down, reset, slow, hang, or answer garbage: every attempt ends in an outcome
 * (never a rejection), a hanging receiver is given up at the attempt's timeout, a 2xx is enough
 * whatever its body, and no connection stays pinned.
 */
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createWebhookTargets, type WebhookTargets } from '../../src/outbox/webhook.js';
import type { DeliveryTarget } from '../../src/outbox/types.js';
import { type FaultServer, neverRespond, resetBeforeHeaders, startFaultServer } from '../helpers/fault-server.js';
import { hermesEvent, outboxEvent, resolveWebhooks, secretFile } from '../helpers/webhooks.js';

let faults: FaultServer | undefined;
let webhooks: WebhookTargets | undefined;

afterEach(async () => {
  await webhooks?.close();
  await faults?.close();
  webhooks = undefined;
  faults = undefined;
});

function targetFor(url: string, timeoutMs = 5000): DeliveryTarget {
  webhooks = createWebhookTargets(resolveWebhooks([{ url, secretFile: secretFile().path, allowLoopbackHttp: true, timeoutMs }]));
  return webhooks.targets[0] as DeliveryTarget;
}

const EVENT = outboxEvent(1, hermesEvent('run.completed'));

function deliver(target: DeliveryTarget, signal = new AbortController().signal) {
  return target.deliver([EVENT], signal);
}

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('a receiver that is down or breaks the connection', () => {
  it('down (connection refused) is retried', async () => {
    const target = targetFor(`http://127.0.0.1:${await closedPort()}/hook`);
    expect(await deliver(target)).toEqual({ kind: 'retry', reason: 'the connection failed (ECONNREFUSED)' });
  });

  it('a reset before any answer is retried', async () => {
    faults = await startFaultServer(resetBeforeHeaders);
    const outcome = await deliver(targetFor(`${faults.url}/hook`));
    expect(outcome.kind).toBe('retry');
    expect(outcome).toMatchObject({ reason: expect.stringMatching(/^the connection failed \((ECONNRESET|UND_ERR_SOCKET)\)$/) });
  });

  it('an answer that is not HTTP is retried', async () => {
    faults = await startFaultServer(async (exchange) => {
      await exchange.write('garbage, not a status line\r\n\r\n');
      exchange.end();
    });
    const outcome = await deliver(targetFor(`${faults.url}/hook`));
    expect(outcome).toMatchObject({ kind: 'retry', reason: expect.stringMatching(/^the connection failed/) });
  });
});

describe('a receiver that is slow or hangs', () => {
  it('slow but within the timeout is delivered', async () => {
    faults = await startFaultServer(async (exchange) => {
      await exchange.sleep(300);
      await exchange.respond(200, 'ok');
    });
    expect(await deliver(targetFor(`${faults.url}/hook`))).toEqual({ kind: 'delivered' });
  });

  it('one that never answers is given up at the timeout and retried, its connection closed', async () => {
    faults = await startFaultServer(neverRespond);
    expect(await deliver(targetFor(`${faults.url}/hook`, 200))).toEqual({ kind: 'retry', reason: 'the receiver did not answer within 200 ms' });
    expect(await faults.requestConnectionClosed()).toEqual({ byClient: true });
  });

  it('a 2xx whose body never ends is delivered, and the body let go at the timeout', async () => {
    faults = await startFaultServer(async (exchange) => {
      await exchange.head(200, { 'Transfer-Encoding': 'chunked' });
      while ((await exchange.chunk('still going ')) && (await exchange.sleep(20)));
    });
    expect(await deliver(targetFor(`${faults.url}/hook`, 300))).toEqual({ kind: 'delivered' });
    expect(await faults.requestConnectionClosed()).toEqual({ byClient: true });
  });

  it('the caller’s abort ends a hanging attempt as a retry', async () => {
    faults = await startFaultServer(neverRespond);
    const target = targetFor(`${faults.url}/hook`, 60_000);
    const abort = new AbortController();
    const attempt = deliver(target, abort.signal);
    await waitFor(() => (faults?.requests.length ?? 0) > 0);
    abort.abort();
    expect(await attempt).toEqual({ kind: 'retry', reason: 'the attempt was aborted: the connector is closing' });
  });

  it('closing the targets ends a hanging attempt as a retry', async () => {
    faults = await startFaultServer(neverRespond);
    const target = targetFor(`${faults.url}/hook`, 60_000);
    const attempt = deliver(target);
    await waitFor(() => (faults?.requests.length ?? 0) > 0);
    await webhooks?.close();
    expect(await attempt).toEqual({ kind: 'retry', reason: 'the attempt was aborted: the connector is closing' });
  });

  it('an already aborted signal sends nothing', async () => {
    faults = await startFaultServer((exchange) => exchange.respond(200, ''));
    const abort = new AbortController();
    abort.abort();
    expect((await deliver(targetFor(`${faults.url}/hook`), abort.signal)).kind).toBe('retry');
    expect(faults.requests).toHaveLength(0);
  });
});

describe('a 2xx with a body nobody asked for', () => {
  it('is delivered whatever the body, and the connection is not pinned by it', async () => {
    const garbage = Buffer.alloc(1024 * 1024, 0xfe);
    faults = await startFaultServer((exchange) => exchange.respond(200, garbage, { 'Content-Type': 'application/json' }));
    const target = targetFor(`${faults.url}/hook`);
    for (let attempt = 0; attempt < 3; attempt++) expect(await deliver(target)).toEqual({ kind: 'delivered' });
    expect(faults.requests).toHaveLength(3);
  });
});

describe('what the engine hands over', () => {
  it('an empty batch is delivered without a request; more than one event is refused', async () => {
    faults = await startFaultServer((exchange) => exchange.respond(200, ''));
    const target = targetFor(`${faults.url}/hook`);
    expect(target.maxBatch).toBe(1);
    expect(await target.deliver([], new AbortController().signal)).toEqual({ kind: 'delivered' });
    expect((await target.deliver([EVENT, outboxEvent(2, hermesEvent('run.failed'))], new AbortController().signal)).kind).toBe('refused');
    expect(faults.requests).toHaveLength(0);
  });

  it.each(['evt.1', '', 'a b', 'x'.repeat(257)])('an event id that cannot be a webhook-id (%j) is refused without a request', async (id) => {
    faults = await startFaultServer((exchange) => exchange.respond(200, ''));
    const outcome = await targetFor(`${faults.url}/hook`).deliver([outboxEvent(1, hermesEvent('run.completed'), id)], new AbortController().signal);
    expect(outcome.kind).toBe('refused');
    expect(faults.requests).toHaveLength(0);
  });
});

/** Polls until `done` holds (bounded only to fail a hung test). */
async function waitFor(done: () => boolean): Promise<void> {
  for (let attempt = 0; attempt < 500 && !done(); attempt++) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(done()).toBe(true);
}
