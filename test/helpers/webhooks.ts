/**
 * Webhook test parts: a secret file, webhooks resolved the way the connector resolves them (with the
 * durable ledger and journal they need), outbox events, and a Standard Webhooks receiver on a real
 * loopback server that verifies every delivery with the `standardwebhooks` package.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterAll } from 'vitest';
import { resolveConfig, type ResolvedWebhook } from '../../src/config.js';
import type { HermesSseEvent } from '../../src/contract/aip.js';
import { createSqliteLedger } from '../../src/ledger/index.js';
import type { OutboxEvent } from '../../src/outbox/types.js';
import type { HermesConnectorOptions, WebhookConfig } from '../../src/types.js';
import { LOCAL_BASE_URL, TEST_API_KEY } from './fixtures.js';

const folder = mkdtempSync(join(tmpdir(), 'aip-webhooks-'));
const ledger = createSqliteLedger({ path: join(folder, 'ledger.db') });
afterAll(async () => {
  await ledger.close();
  rmSync(folder, { recursive: true, force: true });
});

let files = 0;

/** A new Standard Webhooks secret (`whsec_` + base64 of 32 random bytes) in a file of this mode. */
export function secretFile(mode = 0o600, content?: string): { path: string; secret: string } {
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const path = join(folder, `secret-${files++}`);
  writeFileSync(path, content ?? `${secret}\n`);
  chmodSync(path, mode);
  return { path, secret };
}

/** Connector options with the durable ledger and journal webhooks need, and these webhooks. */
export function webhookOptions(webhooks: unknown, overrides: Record<string, unknown> = {}): HermesConnectorOptions {
  return {
    endpoints: [{ id: 'ep1', baseUrl: LOCAL_BASE_URL, apiKey: TEST_API_KEY, tenantId: 'tenant-a' }],
    ledger,
    journal: {},
    webhooks,
    ...overrides,
  } as unknown as HermesConnectorOptions;
}

/** The webhooks as createHermesConnector resolves them. */
export function resolveWebhooks(webhooks: WebhookConfig[]): readonly ResolvedWebhook[] {
  return resolveConfig(webhookOptions(webhooks)).webhooks;
}

/** A journaled event of run `run-1` of tenant-a's endpoint ep1. */
export function outboxEvent(sequence: number, event: HermesSseEvent, id = `evt_${sequence}`): OutboxEvent {
  return { id, key: { tenant_id: 'tenant-a', endpoint_id: 'ep1', run_id: 'run-1' }, sequence, event };
}

export function hermesEvent(name: string, fields: Record<string, unknown> = {}): HermesSseEvent {
  return { event: name, data: { event: name, run_id: 'run-1', timestamp: 1_790_000_000.25, ...fields } };
}

export interface Delivery {
  /** The request target: path and query. */
  target: string;
  headers: Record<string, string>;
  body: string;
  /** The payload Webhook.verify returned, or undefined when verification threw (`error` says why). */
  verified: unknown;
  error: string | undefined;
}

/** Answers one delivery; `index` counts the deliveries received, from 0. */
export type Answer = (response: ServerResponse, index: number, request: IncomingMessage) => void | Promise<void>;

export interface Receiver {
  readonly url: string;
  readonly deliveries: Delivery[];
  answer(answer: Answer): void;
  close(): Promise<void>;
}

export const answerStatus =
  (status: number, headers: Record<string, string> = {}, body = ''): Answer =>
  (response) => {
    response.writeHead(status, headers).end(body);
  };

/** A real HTTP server on 127.0.0.1:0 that verifies each delivery with standardwebhooks' Webhook.verify, then answers. */
export async function startReceiver(secret: string, answer: Answer = answerStatus(204)): Promise<Receiver> {
  const verifier = new Webhook(secret);
  const deliveries: Delivery[] = [];
  let current = answer;
  const server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const headers = Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name, String(value)]));
    const delivery: Delivery = { target: request.url ?? '', headers, body, verified: undefined, error: undefined };
    try {
      delivery.verified = verifier.verify(body, headers);
    } catch (error) {
      delivery.error = (error as Error).message;
    }
    deliveries.push(delivery);
    await current(response, deliveries.length - 1, request);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks/hermes?token=path-canary-q`,
    deliveries,
    answer(next) {
      current = next;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
