/**
 * connector.offers(): each endpoint's declaration read over real HTTP, once, shared by concurrent
 * callers, read again when it could not be read or after a transport failure.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHermesConnector, type HermesConnector } from 'aip-connector-hermes-agent';
import { afterEach, describe, expect, it } from 'vitest';
import { API_KEY, harnessFactory, nextId } from '../helpers/harness.js';

const harness = harnessFactory();

describe('offers() against the simulator', () => {
  it("a v0.22 endpoint's declaration is read once and offers durable run idempotency and steer", async () => {
    const h = await harness({ simulator: { profile: 'v0.22' } });
    const [first, second] = await Promise.all([h.connector.offers(), h.connector.offers()]);
    const third = await h.connector.offers();
    expect(first['local']).toMatchObject({ source: 'capabilities', durable_run_idempotency: { retention_seconds: 86400 }, run_steer: true });
    expect(second).toEqual(first);
    expect(third).toEqual(first);
    expect(h.sim.requests.filter((request) => request.path === '/v1/capabilities')).toHaveLength(1);
  });

  it('the earlier profiles declare what their releases declare: v0.20 steer alone, v0.19 and the pin neither', async () => {
    for (const [profile, steer] of [
      ['v0.20', true],
      ['v0.19', false],
      ['pin', false],
    ] as const) {
      const h = await harness({ simulator: { profile } });
      const offers = await h.connector.offers();
      expect(offers['local'], profile).toMatchObject({ source: 'capabilities', durable_run_idempotency: null, run_steer: steer });
    }
  });

  it('an endpoint that does not serve a declaration (404) offers nothing beyond the pin', async () => {
    const h = await harness({ simulator: { profile: 'later' } });
    const offers = await h.connector.offers();
    expect(offers['local']).toMatchObject({ source: 'not_served', durable_run_idempotency: null, run_steer: false });
  });
});

describe('offers() against a scripted server', () => {
  let server: Server | undefined;
  let connector: HermesConnector | undefined;
  afterEach(async () => {
    await connector?.close();
    await new Promise((resolve) => server?.close(resolve));
    server = connector = undefined;
  });

  /** A server answering each request with the next scripted handler; counts the declaration reads. */
  async function scripted(handle: (req: IncomingMessage, res: ServerResponse, reads: number) => void): Promise<{ reads: () => number }> {
    let reads = 0;
    server = createServer((req, res) => {
      if (req.url === '/v1/capabilities') reads++;
      handle(req, res, reads);
    });
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    connector = createHermesConnector({ endpoints: [{ id: 'local', baseUrl: `http://127.0.0.1:${port}`, apiKey: API_KEY }] });
    return { reads: () => reads };
  }

  const durableDeclaration = JSON.stringify({ features: { runs_idempotency: { supported: true, durable: true, retention_seconds: 60 } } });

  it('an unreadable declaration (a 500) offers nothing and is read again at the next use', async () => {
    const server = await scripted((_req, res, reads) => {
      if (reads === 1) res.writeHead(500).end('down');
      else res.writeHead(200, { 'content-type': 'application/json' }).end(durableDeclaration);
    });
    expect((await connector?.offers())?.['local']).toMatchObject({ source: 'unreadable', durable_run_idempotency: null });
    expect((await connector?.offers())?.['local']).toMatchObject({ source: 'capabilities', durable_run_idempotency: { retention_seconds: 60 } });
    expect(server.reads()).toBe(2);
  });

  it('the declaration is sent the bearer key and is read again after a transport failure (Hermes may be back as another release)', async () => {
    const authorizations: Array<string | undefined> = [];
    const server = await scripted((req, res) => {
      if (req.url === '/v1/capabilities') {
        authorizations.push(req.headers.authorization);
        res.writeHead(200, { 'content-type': 'application/json' }).end(durableDeclaration);
      } else req.socket.destroy();
    });
    await connector?.offers();
    await connector?.offers();
    expect(server.reads()).toBe(1);
    const status = await connector?.invoke({ id: nextId(), capability_id: 'cap:hermes_agent:local:run_status', input: { run_id: 'run_1' } });
    expect(status?.error?.code).toBe('connector.hermes_agent.transport');
    await connector?.offers();
    expect(server.reads()).toBe(2);
    expect(authorizations).toEqual([`Bearer ${API_KEY}`, `Bearer ${API_KEY}`]);
  });

  it('a declaration that is not JSON offers nothing', async () => {
    await scripted((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>'));
    expect((await connector?.offers())?.['local']).toMatchObject({ source: 'unreadable', run_steer: false });
  });
});
