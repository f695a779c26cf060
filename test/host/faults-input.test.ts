/**
 * Hostile input on `POST /aip/v1/messages`: garbage, oversize bodies (refused from the
 * declared length, before the body is read), slow bodies, fields the reference types do not
 * know, a thousand connections at once. The host never crashes, never calls Hermes for any
 * of it, and its memory stays bounded.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/host/wire/json.js';
import { MESSAGES_PATH } from '../helpers/aip-runtime/deployment.js';
import { closeDeployments, getJson, runAction, runRequests, startDeployment, type Deployment } from '../helpers/aip-runtime/deployment-fixture.js';
import { expectSignedResult, startRunThroughHost } from '../helpers/aip-runtime/expectations.js';
import { chunkedBody, concurrentGets, partialBody, residentBytes } from '../helpers/aip-runtime/raw-client.js';

const MAX_REQUEST_BYTES = 4 * 1024 * 1024;
const MiB = 1024 * 1024;

describe('hostile input', () => {
  let deployment: Deployment;
  let runId: string;
  let port: number;

  beforeAll(async () => {
    // The readiness probe of Hermes (in this busy test process) gets room, so that the flood meets the host's own limits.
    deployment = await startDeployment({ settings: { HEALTH_TIMEOUT_MS: '10000' } });
    port = Number(new URL(deployment.host.origin).port);
    runId = await startRunThroughHost(deployment);
  });
  afterAll(closeDeployments);

  async function expectAlive(): Promise<void> {
    expect(deployment.host.child.exitCode, deployment.host.stderr()).toBeNull();
    expect((await getJson(`${deployment.host.origin}/health`)).status).toBe(200);
    expect(deployment.host.stderr()).not.toMatch(/uncaught|unhandled|FATAL ERROR|heap out of memory/i);
  }

  const post = (body: string | Uint8Array, contentType = 'application/json') =>
    fetch(deployment.host.target.url, { method: 'POST', headers: { 'content-type': contentType }, body });

  it.each([
    ['text that is not JSON', 'not json at all {'],
    ['an empty body', ''],
    ['a JSON array', '[]'],
    ['a JSON number', '42'],
    ['nesting 10,000 deep', `${'['.repeat(10_000)}${']'.repeat(10_000)}`],
    ['a lone surrogate', '{"aip_version":"1.0","message_type":"\\ud800"}'],
    ['a duplicate key', '{"aip_version":"1.0","aip_version":"2.0"}'],
  ])('garbage (%s) → 400, unsigned, no Hermes call', async (_what, body) => {
    const hermesRequests = runRequests(deployment.simulator);
    const response = await post(body);
    expect(response.status).toBe(400);
    // A body that is JSON gets the unsigned permanent error of check 1; one that is not, axum's plain-text `Json` rejection.
    if (response.headers.get('content-type')?.startsWith('application/json')) {
      expect(((await response.json()) as any).error).toMatchObject({ category: 'permanent', retryable: false });
    } else expect(await response.text()).toMatch(/^Failed to (parse|deserialize|buffer)/);
    expect(runRequests(deployment.simulator)).toBe(hermesRequests);
    await expectAlive();
  });

  it('invalid UTF-8 → 400, no Hermes call', async () => {
    const response = await post(Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]));
    expect(response.status).toBe(400);
    await expectAlive();
  });

  it('a declared Content-Length over 4 MiB → 413 while almost none of the body was sent', async () => {
    const { statusLine, socket } = await partialBody(port, MESSAGES_PATH, MAX_REQUEST_BYTES + 1, Buffer.from('{"aip_version":'));
    socket.destroy();
    expect(statusLine).toMatch(/^HTTP\/1\.1 413 /);
    await expectAlive();
  });

  it('chunked bodies over 4 MiB are refused (413 or a cut connection) and memory stays bounded', async () => {
    const before = residentBytes(deployment.host.child.pid!);
    const statuses = await Promise.all(Array.from({ length: 20 }, () => chunkedBody(port, MESSAGES_PATH, 16 * MiB)));
    for (const status of statuses) expect([0, 413]).toContain(status);
    // 20 × 16 MiB = 320 MiB sent; buffering up to the 4 MiB limit each is 80 MiB at most, plus room for the heap.
    expect(residentBytes(deployment.host.child.pid!) - before).toBeLessThan(20 * MAX_REQUEST_BYTES + 64 * MiB);
    await expectAlive();
  });

  it('slow bodies do not stop other requests from being served', async () => {
    const slow = await Promise.all(
      Array.from({ length: 50 }, async () => {
        const { connect } = await import('node:net');
        const socket = connect(port, '127.0.0.1');
        socket.on('error', () => {});
        socket.write(`POST ${MESSAGES_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`);
        return socket;
      }),
    );
    try {
      expectSignedResult(await deployment.runtime.dispatcher.invoke(deployment.host.target, runAction('run_status', runId)));
    } finally {
      for (const socket of slow) socket.destroy();
    }
    await expectAlive();
  });

  it.each([
    ['a top-level field', (envelope: any) => void (envelope.x_unknown = 1)],
    ['an action field', (envelope: any) => void (envelope.body.action.x_unknown = 'extra')],
  ])(
    'an unknown %s covered by the signature → 400 unsigned schema.envelope.invalid (aip-schema closes typed objects), no Hermes call',
    async (_what, addField) => {
      const hermesRequests = runRequests(deployment.simulator);
      const { key } = deployment.runtime.gateway;
      const resigned = (envelope: any) => {
        addField(envelope);
        delete envelope.security.signature;
        envelope.security.signature = key.sign(canonicalJson(envelope));
      };
      const outcome = await deployment.runtime.dispatcher.invoke(deployment.host.target, runAction('run_status', runId), { tamper: resigned });
      // `harden_object_schemas` (crates/aip-schema) adds `additionalProperties: false` to every typed object: check 1.
      expect(outcome.exchange.status).toBe(400);
      expect(JSON.parse(outcome.exchange.text).error).toMatchObject({ code: 'schema.envelope.invalid', category: 'permanent', retryable: false });
      expect(runRequests(deployment.simulator)).toBe(hermesRequests);
    },
  );

  it('1,000 concurrent connections are all answered', async () => {
    const statuses = await concurrentGets(`${deployment.host.origin}/health`, 1_000);
    expect(statuses.filter((status) => status !== 200)).toEqual([]);
    await expectAlive();
  });

  it('300 concurrent actions: each a verified 200 result or a signed temporary refusal (429 capacity, 503 not ready); Hermes sees only the admitted ones', async () => {
    const hermesRequests = runRequests(deployment.simulator);
    const outcomes = await Promise.all(
      Array.from({ length: 300 }, () => deployment.runtime.dispatcher.invoke(deployment.host.target, runAction('run_status', runId), { timeoutMs: 60_000 })),
    );
    const failed = outcomes.flatMap((outcome) => outcome.verdict.failed);
    expect(failed.slice(0, 5)).toEqual([]);
    const byStatus = new Map<string, number>();
    for (const outcome of outcomes) {
      const key = `${outcome.exchange.status} ${outcome.verdict.error?.code ?? outcome.verdict.actionResult?.status}`;
      byStatus.set(key, (byStatus.get(key) ?? 0) + 1);
    }
    // The host may also report itself not ready while its readiness probe of Hermes queues behind the flood: temporary, signed.
    const allowed = ['200 completed', '429 connector_host.capacity', '503 connector_host.not_ready'];
    expect(
      [...byStatus.keys()].filter((key) => !allowed.includes(key)),
      JSON.stringify([...byStatus]),
    ).toEqual([]);
    expect(byStatus.get('200 completed') ?? 0).toBeGreaterThan(0);
    expect(runRequests(deployment.simulator) - hermesRequests, JSON.stringify([...byStatus])).toBe(byStatus.get('200 completed') ?? 0);
    await expectAlive();
  }, 120_000);
});
