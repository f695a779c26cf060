/**
 * Hostile input at full size (issue 23, item 6): 1,000 connections at once against a spawned
 * `hermes-aip host`, a mix of garbage, slow bodies and valid signed actions each on a
 * connection of its own. The host stays up, answers every valid action exactly once (one
 * verified answer each, one Hermes request per executed action), answers every garbage body
 * as the reference does, keeps its memory bounded and releases every socket afterwards.
 */
import type { Socket } from 'node:net';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatewayParty, MESSAGES_PATH } from '../helpers/aip-runtime/deployment.js';
import { closeDeployments, getJson, runAction, runRequests, startDeployment, type Deployment } from '../helpers/aip-runtime/deployment-fixture.js';
import { startRunThroughHost } from '../helpers/aip-runtime/expectations.js';
import { openSockets, postOnOwnConnection, residentBytes, trickledBody } from '../helpers/aip-runtime/raw-client.js';
import { waitUntil } from './host-process.js';

const MiB = 1024 * 1024;
const VALID = 300;
const GARBAGE_PER_KIND = 75;
const STALLED = 200;
const TRICKLED = 200;
/** Sockets the host may hold beyond its count before the flood once it is over (a keep-alive connection to Hermes or the control plane opened meanwhile). */
const SOCKET_SLACK = 4;

describe('1,000 concurrent connections: garbage, slow bodies and valid signed actions', () => {
  let deployment: Deployment;
  let runId: string;
  let port: number;
  let pid: number;

  beforeAll(async () => {
    // Room for everything the flood queues behind: the readiness probe of Hermes, heartbeats, every valid action.
    deployment = await startDeployment({ settings: { HEALTH_TIMEOUT_MS: '10000', MAX_IN_FLIGHT: String(VALID) } });
    port = Number(new URL(deployment.host.origin).port);
    pid = deployment.host.child.pid!;
    runId = await startRunThroughHost(deployment);
  });
  afterAll(closeDeployments);

  /** A valid signed run_status, sent once (no retry) on its own connection, and what the central checks make of the answer. */
  async function validAction() {
    const { dispatcher } = deployment.runtime;
    const prepared = dispatcher.prepareAction(deployment.host.target, runAction('run_status', runId));
    const answer = await postOnOwnConnection(deployment.host.target.url, prepared.headers, prepared.text);
    return { actionId: (prepared.envelope.body as { action: { id: string } }).action.id, verdict: dispatcher.verify(prepared, { ...answer, attempts: 1 }) };
  }

  /** Garbage of four kinds, each with the status the reference host answers it with. */
  function garbage(): Array<Promise<{ expected: number; status: number }>> {
    const url = deployment.host.target.url;
    const untrusted = deployment.runtime.dispatcher.prepareAction(deployment.host.target, runAction('run_status', runId), { signer: gatewayParty() });
    const kinds: Array<[number, Record<string, string>, () => string]> = [
      [400, { 'content-type': 'application/json' }, () => 'not json at all {'],
      [400, { 'content-type': 'application/json' }, () => '{"hello":"world"}'],
      [415, { 'content-type': 'text/plain' }, () => '{"hello":"world"}'],
      [401, untrusted.headers, () => untrusted.text],
    ];
    return kinds.flatMap(([expected, headers, body]) =>
      Array.from({ length: GARBAGE_PER_KIND }, async () => ({ expected, status: (await postOnOwnConnection(url, headers, body())).status })),
    );
  }

  /** A request that declares 1,000 bytes of body and sends one; `answered` says whether the host wrote anything back. */
  function stalledBody(): { socket: Socket; answered: () => boolean } {
    const socket = connect(port, '127.0.0.1');
    let answered = false;
    socket.on('data', () => {
      answered = true;
    });
    socket.on('error', () => {});
    socket.write(`POST ${MESSAGES_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`);
    return { socket, answered: () => answered };
  }

  it('the host stays up, answers every valid action exactly once, answers the garbage, keeps its memory bounded and releases every socket', async () => {
    const baselineSockets = openSockets(pid);
    const rssBefore = residentBytes(pid);
    const hermesBefore = runRequests(deployment.simulator);
    let peakSockets = baselineSockets;
    let peakRss = rssBefore;
    const sampler = setInterval(() => {
      peakSockets = Math.max(peakSockets, openSockets(pid));
      peakRss = Math.max(peakRss, residentBytes(pid));
    }, 25);

    const stalled = Array.from({ length: STALLED }, stalledBody);
    const [valid, garbageAnswers, trickled] = await Promise.all([
      Promise.all(Array.from({ length: VALID }, validAction)),
      Promise.all(garbage()),
      Promise.all(Array.from({ length: TRICKLED }, () => trickledBody(port, MESSAGES_PATH, '{"hello":"world"}', 3, 300))),
    ]);
    // The stalled bodies were open throughout: none was answered (their 30 s body bound has not passed).
    expect(stalled.filter((request) => request.answered())).toHaveLength(0);
    for (const request of stalled) request.socket.destroy();
    clearInterval(sampler);

    // Every valid action: one answer, a signed 200 action_result for that action that passes every central check.
    const failures = valid.filter(({ verdict }) => verdict.failed.length > 0 || verdict.actionResult?.status !== 'completed');
    expect(failures.slice(0, 3).map(({ verdict }) => verdict.failed)).toEqual([]);
    expect(new Set(valid.map(({ verdict }) => verdict.actionResult?.action_id)).size).toBe(VALID);
    expect(valid.every(({ actionId, verdict }) => verdict.actionResult?.action_id === actionId)).toBe(true);
    // Executed exactly once each: one Hermes request per valid action, none for anything else.
    expect(runRequests(deployment.simulator) - hermesBefore).toBe(VALID);
    expect(garbageAnswers.filter(({ expected, status }) => expected !== status)).toEqual([]);
    expect(trickled.filter((status) => status !== 400)).toEqual([]);

    expect(deployment.host.child.exitCode, deployment.host.stderr()).toBeNull();
    expect((await getJson(`${deployment.host.origin}/health`)).status).toBe(200);
    expect(deployment.host.stderr()).not.toMatch(/uncaught|unhandled|FATAL ERROR|heap out of memory|EMFILE/i);
    // No socket leak: once the clients are gone (and idle keep-alive connections timed out), the host is back to what it held before.
    await waitUntil(() => openSockets(pid) <= baselineSockets + SOCKET_SLACK, 'the host to release the flood sockets', 30_000);

    const rssAfter = residentBytes(pid);
    console.info(
      `flood of ${VALID + 4 * GARBAGE_PER_KIND + STALLED + TRICKLED} connections: host sockets ${baselineSockets} → peak ${peakSockets} → ${openSockets(pid)}; ` +
        `RSS ${(rssBefore / MiB).toFixed(1)} MiB → peak ${(peakRss / MiB).toFixed(1)} MiB → ${(rssAfter / MiB).toFixed(1)} MiB`,
    );
    // The stalled requests alone held STALLED sockets open at the same time.
    expect(peakSockets).toBeGreaterThanOrEqual(baselineSockets + STALLED);
    // A generous bound: what 1,000 connections and 300 executions may cost, not a target.
    expect(peakRss - rssBefore).toBeLessThan(256 * MiB);
  }, 180_000);
});
