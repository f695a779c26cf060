/**
 * A delivery target double over a real loopback HTTP receiver: deliver() POSTs the batch as JSON,
 * and the receiver answers as scripted (a status, garbage, or nothing at all), so the outbox meets
 * a target that is down, slow, failing or hanging over real HTTP.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll } from 'vitest';
import type { DeliveryOutcome, DeliveryRecord, DeliveryTarget, HermesConnector, HermesSseEvent, OutboxEvent } from 'aip-connector-hermes-agent';
import { eventually } from './harness.js';

/** What the receiver kept of one event it acknowledged. */
export interface Received {
  id: string;
  run_id: string;
  sequence: number;
  event: string;
}

/** How the receiver answers one request: 'ok' (200 and acknowledged), a status, 'garbage' (200, not the acknowledgement), or 'hang'. */
export type Answer = 'ok' | 'garbage' | 'hang' | number;

export interface Receiver {
  url: string;
  /** Every event acknowledged, in arrival order (duplicates included). */
  received: Received[];
  /** Requests seen, acknowledged or not. */
  requests: number;
  /** Answers for the next requests, in order; then `otherwise`. */
  answers: Answer[];
  otherwise: Answer;
  close(): Promise<void>;
}

const receivers: Receiver[] = [];
afterAll(async () => {
  for (const receiver of receivers.splice(0)) await receiver.close();
});

export async function startReceiver(): Promise<Receiver> {
  const hanging = new Set<ServerResponse>();
  const receiver: Receiver = { url: '', received: [], requests: 0, answers: [], otherwise: 'ok', close: async () => undefined };
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      receiver.requests++;
      const answer = receiver.answers.shift() ?? receiver.otherwise;
      if (answer === 'hang') return void hanging.add(response);
      if (answer === 'garbage') return void response.writeHead(200, { 'content-type': 'text/html' }).end('<html>proxy error</html>');
      if (answer !== 'ok') return void response.writeHead(answer).end();
      receiver.received.push(...(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Received[]));
      response.writeHead(200, { 'content-type': 'application/json' }).end('{"accepted":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/events`;
  receiver.close = async () => {
    for (const response of hanging) response.destroy();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  receivers.push(receiver);
  return receiver;
}

export interface TargetDouble extends DeliveryTarget {
  /** deliver() calls made, and how many are in flight. */
  calls: number;
  inFlight: number;
}

/** A target that POSTs to `url`: 2xx with the acknowledgement is delivered, 4xx refused, anything else (5xx, garbage, a network error, an abort) a retry. */
export function httpTarget(url: string, options: { id?: string; maxBatch?: number; accepts?: (event: HermesSseEvent) => boolean } = {}): TargetDouble {
  const target: TargetDouble = {
    id: options.id ?? 'receiver',
    maxBatch: options.maxBatch ?? 10,
    calls: 0,
    inFlight: 0,
    accepts: options.accepts ?? (() => true),
    async deliver(events: readonly OutboxEvent[], signal: AbortSignal): Promise<DeliveryOutcome> {
      target.calls++;
      target.inFlight++;
      try {
        const body = events.map(({ id, key, sequence, event }) => ({ id, run_id: key.run_id, sequence, event: event.event }));
        const response = await fetch(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' }, signal });
        const text = await response.text();
        if (response.status >= 400 && response.status < 500 && response.status !== 429) return { kind: 'refused', reason: `HTTP ${response.status}` };
        if (!response.ok) return { kind: 'retry', reason: `HTTP ${response.status}` };
        return text === '{"accepted":true}' ? { kind: 'delivered' } : { kind: 'retry', reason: 'the receiver answered with no acknowledgement' };
      } catch (error) {
        return { kind: 'retry', reason: signal.aborted ? 'aborted' : `unreachable: ${(error as Error).name}` };
      } finally {
        target.inFlight--;
      }
    },
  };
  return target;
}

/** Events of one run as received, in arrival order. */
export const receivedFor = (receiver: Receiver, runId: string) => receiver.received.filter((event) => event.run_id === runId);

/** The run's (only) delivery once it has ended (delivered or given up); polls as `eventually` does, failing a hung test. */
export async function deliveryEnded(connector: HermesConnector, runId: string, attempts = 1500): Promise<DeliveryRecord> {
  return eventually(
    async () => {
      const [record] = await connector.deliveries(runId).catch(() => []);
      return record && record.state !== 'pending' ? record : undefined;
    },
    `the delivery of ${runId} ended`,
    attempts,
  );
}
