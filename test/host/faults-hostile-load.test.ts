/**
 * Hostile load (issue 31, item 4): 100 bodies of 4 MiB at once, each a well-formed envelope whose
 * signature no longer covers it (the reference's `reject.bad_signature`, 401), shaped to cost the
 * most to parse and canonicalise, against a spawned `hermes-aip host` whose heap is capped.
 * Meanwhile one valid signed action must be answered within the runtime's own request timeout
 * (5 s, one attempt, no retry), the host must stay up, and every flood body must get the
 * reference's answer (401) or, when the host had no room to read it within the body bound, 408.
 * And the connection cap of ours: connections beyond it are closed on accept.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDeployments, getJson, runAction, startDeployment, type Deployment } from '../helpers/aip-runtime/deployment-fixture.js';
import { REQUEST_TIMEOUT_MS } from '../helpers/aip-runtime/dispatcher.js';
import { expectSignedResult, startRunThroughHost } from '../helpers/aip-runtime/expectations.js';
import { badSignatureBody, COSTLY_FILLERS, heapPeaks } from '../helpers/aip-runtime/hostile-bodies.js';
import { peakResidentBytes, postOnOwnConnection, residentBytes } from '../helpers/aip-runtime/raw-client.js';
import { waitUntil } from './host-process.js';

const MiB = 1024 * 1024;
const FLOOD = 100;
/**
 * The heap the host process may use in all, 512 MB: the event loop's old space is capped at 256 MB (going over it
 * crashes the host), the authentication worker's at 256 MB by the host itself (going over it fails a body, which
 * then gets a 500 this test refuses). `--trace-gc` prints each heap's size at every collection: their peaks.
 */
const MAIN_HEAP_CAP_MB = 256;
const HEAP_BOUND_MB = 512;

describe('100 concurrent 4 MiB bodies with bad signatures', () => {
  let deployment: Deployment;
  let runId: string;

  beforeAll(async () => {
    deployment = await startDeployment({ settings: { HEALTH_TIMEOUT_MS: '10000' }, nodeArgs: [`--max-old-space-size=${MAIN_HEAP_CAP_MB}`, '--trace-gc'] });
    runId = await startRunThroughHost(deployment);
  });
  afterAll(closeDeployments);

  it('leave the host up within its heap cap, and a valid action sent meanwhile is answered within the runtime timeout', async () => {
    const pid = deployment.host.child.pid!;
    const rssBefore = residentBytes(pid);
    const bodies = Object.values(COSTLY_FILLERS).map((filler) => badSignatureBody(deployment.runtime.dispatcher, deployment.host.target, runId, filler));
    const url = deployment.host.target.url;
    const answered: number[] = [];
    const flood = Array.from({ length: FLOOD }, async (_, i) => {
      const { headers, body } = bodies[i % bodies.length]!;
      const { status } = await postOnOwnConnection(url, headers, body);
      answered.push(status);
      return status;
    });

    // Sent while the flood is being worked on: after its first answer, with most of it still in flight.
    await waitUntil(() => answered.length > 0, 'a first answer to the flood', 120_000);
    const inFlightWhenSent = FLOOD - answered.length;
    const started = Date.now();
    const outcome = await deployment.runtime.dispatcher.invoke(deployment.host.target, runAction('run_status', runId), {
      timeoutMs: REQUEST_TIMEOUT_MS,
      retryBudget: 0,
    });
    const latencyMs = Date.now() - started;
    const inFlightWhenAnswered = FLOOD - answered.length;
    expect(outcome.exchange.transportError, `the valid action (sent with ${inFlightWhenSent} flood bodies in flight)`).toBeUndefined();
    expect(expectSignedResult(outcome).status).toBe('completed');
    expect(inFlightWhenSent).toBeGreaterThan(FLOOD / 2);

    const statuses = await Promise.all(flood);
    const peakRss = peakResidentBytes(pid);
    const heaps = heapPeaks(deployment.host.stdout());
    const heapPeak = [...heaps.values()].reduce((sum, peak) => sum + peak, 0);
    console.info(
      `hostile load: valid action answered in ${latencyMs} ms with ${inFlightWhenSent} → ${inFlightWhenAnswered} flood bodies in flight; ` +
        `flood answers ${JSON.stringify(countBy(statuses))}; heap peaks ${[...heaps.values()].map((peak) => peak.toFixed(0)).join(' + ')} MB; ` +
        `host RSS ${(rssBefore / MiB).toFixed(0)} MiB → peak ${(peakRss / MiB).toFixed(0)} MiB`,
    );
    // Every isolate's heap at its largest, added up as if they had peaked at the same time.
    expect(heaps.size).toBeGreaterThanOrEqual(2);
    expect(heapPeak).toBeLessThan(HEAP_BOUND_MB);
    // The reference's answer to a body changed after signing, or 408 for a body the host had no room to read in time.
    expect(statuses.filter((status) => status !== 401 && status !== 408)).toEqual([]);
    expect(statuses.filter((status) => status === 401).length).toBeGreaterThan(0);

    expect(deployment.host.child.exitCode, deployment.host.stderr()).toBeNull();
    expect(deployment.host.stderr()).not.toMatch(/uncaught|unhandled|FATAL ERROR|heap out of memory|out of memory/i);
    expect((await getJson(`${deployment.host.origin}/health`)).status).toBe(200);
    expectSignedResult(await deployment.runtime.dispatcher.invoke(deployment.host.target, runAction('run_status', runId)));
  }, 240_000);
});

describe('AIP_CONNECTOR_HOST_MAX_CONNECTIONS (ours)', () => {
  let deployment: Deployment;
  let runId: string;
  const CAP = 8;

  beforeAll(async () => {
    deployment = await startDeployment({ settings: { MAX_CONNECTIONS: String(CAP) } });
    runId = await startRunThroughHost(deployment);
  });
  afterAll(closeDeployments);

  it('closes connections beyond the cap as soon as they are accepted, and serves again once they are gone', async () => {
    const port = Number(new URL(deployment.host.origin).port);
    const sockets = Array.from({ length: 2 * CAP }, () => {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => {});
      // A request head that never ends: the host keeps the connection until its 10 s header bound.
      socket.write('GET /health HTTP/1.1\r\nHost: x\r\n');
      return socket;
    });
    // The host's own keep-alive connections (the runtime's pool, the readiness probes) count too: at least CAP of these are closed.
    await waitUntil(() => sockets.filter((socket) => socket.closed).length >= CAP, 'the host to close the connections beyond its cap', 10_000);
    expect(sockets.filter((socket) => !socket.closed).length).toBeLessThanOrEqual(CAP);
    for (const socket of sockets) socket.destroy();
    await waitUntil(async () => (await fetch(`${deployment.host.origin}/health`).catch(() => undefined))?.status === 200, 'the host to serve again', 10_000);
    expectSignedResult(await deployment.runtime.dispatcher.invoke(deployment.host.target, runAction('run_status', runId)));
  });
});

function countBy(values: number[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}
