/**
 * npm run hermes:capture -- --version 0.22.2.post1 [--out DIR]: launches one real Hermes (installed by
 * npm run hermes:install) with the fake model on 127.0.0.1 and records raw HTTP/1.1 exchanges of the
 * run routes as `.http` files (default fixtures/captures/hermes-<version>/), in the format of
 * fixtures/captures/: `### request`, the request bytes, `### response (raw bytes; Date scrubbed)`, the
 * response bytes exactly as received (chunk framing included). The key is written as `<key>` and
 * `Date` as `<date>`; nothing else is changed. Every request asks for `Connection: close`.
 *
 * Scenarios (file name prefixes): 0x health and capabilities; 1x a lifecycle with an approval and the
 * replays of its events; 2x an approval answered by request_id; 3x errors; 4x stop; 5x steer; 6x the
 * 429 gate and a keepalive; 7x replay truncation; 8x Idempotency-Key; 9x a restart (graceful, then a crash).
 * Exchanges a release does not serve answer whatever it answers (404 included): the files say it.
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { chosenHermesVersion, startHermesWithFakeModel, type RealHermes } from '../test/helpers/real-hermes.js';

const { values } = parseArgs({ options: { version: { type: 'string' }, out: { type: 'string' } }, strict: true });
const version = chosenHermesVersion('hermes:capture', values.version);
const out = resolve(values.out ?? fileURLToPath(new URL(`../fixtures/captures/hermes-${version}/`, import.meta.url)));
/** The gate is small, so that two runs held at approvals fill it. */
const MAX_CONCURRENT_RUNS = 2;
/** Bounds every wait, so that a release that never does what a scenario waits for fails the capture instead of hanging. */
const WAIT_MS = 90_000;

interface Exchange {
  request: string;
  response: Buffer;
}

interface RawOptions {
  body?: string;
  key?: string | null;
  headers?: Array<[string, string]>;
  /** Called with the response bytes so far, each time more arrive (for acting in the middle of a stream). */
  onData?: (soFar: string) => void;
  /** The client closes the connection once the response bytes so far satisfy this (a subscriber going away). */
  cutWhen?: (soFar: string) => boolean;
}

const { model, hermes } = await startHermesWithFakeModel({ version, maxConcurrentRuns: MAX_CONCURRENT_RUNS });
const port = Number(new URL(hermes.baseUrl).port);
const written: string[] = [];

function requestText(method: string, path: string, options: RawOptions): string {
  const lines = [`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1'];
  const key = options.key === undefined ? hermes.apiKey : options.key;
  if (key !== null) lines.push(`Authorization: Bearer ${key}`);
  lines.push('Connection: close');
  for (const [name, value] of options.headers ?? []) lines.push(`${name}: ${value}`);
  if (options.body !== undefined) lines.push('Content-Type: application/json', `Content-Length: ${Buffer.byteLength(options.body)}`);
  return `${lines.join('\r\n')}\r\n\r\n${options.body ?? ''}`;
}

/** One exchange on its own connection, read until the server closes it. */
function raw(method: string, path: string, options: RawOptions = {}): Promise<Exchange> {
  const request = requestText(method, path, options);
  return new Promise((resolvePromise, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`${method} ${path}: no end within ${WAIT_MS} ms; got ${Buffer.concat(chunks).toString('utf8').slice(-2000)}`));
    }, WAIT_MS);
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      const soFar = Buffer.concat(chunks).toString('utf8');
      options.onData?.(soFar);
      if (options.cutWhen?.(soFar) === true) socket.destroy();
    });
    socket.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolvePromise({ request, response: Buffer.concat(chunks) });
    });
    socket.write(request);
  });
}

function save(name: string, exchange: Exchange): Exchange {
  const request = exchange.request.replaceAll(hermes.apiKey, '<key>');
  const response = exchange.response.toString('latin1').replace(/^Date: [^\r\n]*/m, 'Date: <date>');
  writeFileSync(join(out, name), Buffer.from(`### request\n${request}\n\n### response (raw bytes; Date scrubbed)\n${response}\n`, 'latin1'));
  written.push(name);
  return exchange;
}

async function capture(name: string, method: string, path: string, options: RawOptions = {}): Promise<Exchange> {
  return save(name, await raw(method, path, options));
}

function jsonBody(exchange: Exchange): Record<string, unknown> {
  const text = exchange.response.toString('utf8');
  return JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as Record<string, unknown>;
}

async function startRun(name: string | undefined, body: Record<string, unknown>, headers: Array<[string, string]> = []): Promise<string> {
  const exchange = await raw('POST', '/v1/runs', { body: JSON.stringify(body), headers });
  if (name !== undefined) save(name, exchange);
  const runId = jsonBody(exchange)['run_id'];
  if (typeof runId !== 'string') throw new Error(`the start was refused: ${exchange.response.toString('utf8')}`);
  return runId;
}

async function statusOf(runId: string): Promise<Record<string, unknown>> {
  const answer = await fetch(`${hermes.baseUrl}/v1/runs/${runId}`, { headers: { authorization: `Bearer ${hermes.apiKey}` } });
  return (await answer.json()) as Record<string, unknown>;
}

async function waitForStatus(runId: string, wanted: (status: string) => boolean, what: string): Promise<Record<string, unknown>> {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const status = await statusOf(runId);
    if (wanted(String(status['status']))) return status;
    if (Date.now() > deadline) throw new Error(`run ${runId} never reached ${what}; last ${JSON.stringify(status)}`);
    await new Promise((resolveSleep) => setTimeout(resolveSleep, 100));
  }
}

const isTerminal = (status: string) => ['completed', 'failed', 'cancelled', 'interrupted'].includes(status);

/** Reads a stream to its end, unrecorded (so that nothing of it holds a slot of the gate). */
const drain = (runId: string) => raw('GET', `/v1/runs/${runId}/events`);

/** Runs `act` once the stream's bytes contain `marker`; resolves with the stream's exchange once it ends. */
async function streamActing(name: string, runId: string, marker: string, act: () => Promise<void>, path = `/v1/runs/${runId}/events`): Promise<Exchange> {
  let acted: Promise<void> | undefined;
  const stream = raw('GET', path, {
    onData: (soFar) => {
      if (acted === undefined && soFar.includes(marker)) acted = act();
    },
  });
  const exchange = await stream;
  if (acted === undefined) throw new Error(`${name}: the stream ended without ${marker}`);
  await acted;
  return save(name, exchange);
}

function scratch(name: string): string {
  mkdirSync(join(hermes.scratchDir, name));
  return name;
}

async function main(hermesServer: RealHermes): Promise<void> {
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const unknown = `run_${'0'.repeat(32)}`;

  // 0x: health and capabilities.
  await capture('00-health-200.http', 'GET', '/health', { key: null });
  await capture('01-capabilities-200.http', 'GET', '/v1/capabilities');

  // 1x: a lifecycle with an approval granted once, then every way of reading its events again.
  const once = scratch('cap-once');
  const lifecycle = await startRun('10-start-202.http', { input: `Run the shell command: rm -rf ./${once}` });
  await streamActing('11-events-lifecycle.http', lifecycle, '"event": "approval.request"', async () => {
    await capture('12-status-waiting.http', 'GET', `/v1/runs/${lifecycle}`);
    await capture('13-approval-once-200.http', 'POST', `/v1/runs/${lifecycle}/approval`, { body: '{"choice": "once"}' });
  });
  await waitForStatus(lifecycle, isTerminal, 'a terminal status');
  await capture('14-status-completed.http', 'GET', `/v1/runs/${lifecycle}`);
  await capture('15-events-again-after-end.http', 'GET', `/v1/runs/${lifecycle}/events`);
  await capture('16-events-last-seq-3.http', 'GET', `/v1/runs/${lifecycle}/events?last_seq=3`);
  await capture('17-events-last-event-id-3.http', 'GET', `/v1/runs/${lifecycle}/events`, { headers: [['Last-Event-ID', '3']] });
  await capture('18-events-last-seq-not-a-number.http', 'GET', `/v1/runs/${lifecycle}/events?last_seq=abc`);
  await capture('19-events-last-seq-past-the-end.http', 'GET', `/v1/runs/${lifecycle}/events?last_seq=1000`);

  // 2x: an approval answered by the request_id the status announced, denied.
  const deny = scratch('cap-deny');
  const denied = await startRun(undefined, { input: `Run the shell command: rm -rf ./${deny}` });
  const waiting = await waitForStatus(denied, (status) => status === 'waiting_for_approval', 'waiting_for_approval');
  const requestId = (waiting['approval'] as { request_id?: unknown } | undefined)?.request_id;
  if (typeof requestId !== 'string') throw new Error(`no approval.request_id in ${JSON.stringify(waiting)}`);
  await capture('20-approval-400-request-id-too-long.http', 'POST', `/v1/runs/${denied}/approval`, {
    body: JSON.stringify({ choice: 'deny', request_id: 'x'.repeat(257) }),
  });
  await capture('21-approval-deny-by-request-id-200.http', 'POST', `/v1/runs/${denied}/approval`, {
    body: JSON.stringify({ choice: 'deny', request_id: requestId }),
  });
  await waitForStatus(denied, isTerminal, 'a terminal status');
  await capture('22-events-denied.http', 'GET', `/v1/runs/${denied}/events`);
  await capture('23-approval-409-finished.http', 'POST', `/v1/runs/${denied}/approval`, { body: '{"choice": "once"}' });
  await capture('24-approval-400-choice.http', 'POST', `/v1/runs/${denied}/approval`, { body: '{"choice": "maybe"}' });
  await capture('25-stop-finished-200.http', 'POST', `/v1/runs/${denied}/stop`, { body: '{}' });
  await capture('26-steer-finished-409.http', 'POST', `/v1/runs/${denied}/steer`, { body: '{"input": "Also say hello."}' });

  // 3x: errors.
  await capture('30-status-404.http', 'GET', `/v1/runs/${unknown}`);
  await capture('31-events-404.http', 'GET', `/v1/runs/${unknown}/events`);
  await capture('32-approval-404.http', 'POST', `/v1/runs/${unknown}/approval`, { body: '{"choice": "once"}' });
  await capture('33-stop-404.http', 'POST', `/v1/runs/${unknown}/stop`, { body: '{}' });
  await capture('34-steer-404.http', 'POST', `/v1/runs/${unknown}/steer`, { body: '{"input": "Hello."}' });
  await capture('35-auth-401.http', 'GET', `/v1/runs/${unknown}`, { key: 'f'.repeat(64) });
  await capture('36-start-400-missing-input.http', 'POST', '/v1/runs', { body: '{}' });
  await capture('37-start-400-invalid-json.http', 'POST', '/v1/runs', { body: '{' });
  await capture('38-start-413-declared-length.http', 'POST', '/v1/runs', {
    headers: [
      ['Content-Type', 'application/json'],
      ['Content-Length', '10000001'],
    ],
  });
  await capture('39-start-400-idempotency-key-invalid.http', 'POST', '/v1/runs', {
    body: '{"input": "Reply with the single word: never"}',
    headers: [['Idempotency-Key', 'has space']],
  });

  // 4x: a stop during a running tool.
  const slow = await startRun('40-start-sleep-202.http', { input: 'Run the shell command: sleep 30' });
  await streamActing('41-events-cancelled.http', slow, '"event": "tool.started"', async () => {
    await capture('42-stop-200.http', 'POST', `/v1/runs/${slow}/stop`, { body: '{}' });
    await capture('43-status-right-after-stop.http', 'GET', `/v1/runs/${slow}`);
  });
  await waitForStatus(slow, isTerminal, 'a terminal status');
  await capture('44-status-cancelled.http', 'GET', `/v1/runs/${slow}`);

  // 5x: steer a run while its tool runs, then stop it.
  const steered = await startRun(undefined, { input: 'Run the shell command: sleep 30' });
  await streamActing('50-events-steered-then-stopped.http', steered, '"event": "tool.started"', async () => {
    await capture('51-steer-400-empty.http', 'POST', `/v1/runs/${steered}/steer`, { body: '{}' });
    await capture('52-steer-200.http', 'POST', `/v1/runs/${steered}/steer`, { body: '{"input": "Also say hello."}' });
    await capture('53-status-after-steer.http', 'GET', `/v1/runs/${steered}`);
    await capture('54-stop-steered-200.http', 'POST', `/v1/runs/${steered}/stop`, { body: '{}' });
  });
  await waitForStatus(steered, isTerminal, 'a terminal status');
  await capture('55-status-steered-cancelled.http', 'GET', `/v1/runs/${steered}`);

  // 6x: the 429 gate, full with two runs held at their approvals.
  const held = [scratch('cap-held-a'), scratch('cap-held-b')];
  const heldRuns: string[] = [];
  for (const folder of held) heldRuns.push(await startRun(undefined, { input: `Run the shell command: rm -rf ./${folder}` }));
  for (const runId of heldRuns) await waitForStatus(runId, (status) => status === 'waiting_for_approval', 'waiting_for_approval');
  await capture('60-start-429.http', 'POST', '/v1/runs', { body: '{"input": "Reply with the single word: late"}' });
  // A subscriber of a held run gets a keepalive after the keepalive interval of silence; the client then goes away.
  await capture('61-events-keepalive-then-cut-by-client.http', 'GET', `/v1/runs/${heldRuns[0]}/events`, { cutWhen: (soFar) => soFar.includes(': keepalive') });
  for (const runId of heldRuns) {
    await raw('POST', `/v1/runs/${runId}/approval`, { body: '{"choice": "deny"}' });
    await waitForStatus(runId, isTerminal, 'a terminal status');
    await drain(runId);
  }

  // 7x: a run with more events than the stream retains (1000), read again from the start and from seq 0.
  const long = await startRun(undefined, { input: 'Stream 1200 deltas.' });
  await waitForStatus(long, isTerminal, 'a terminal status');
  await capture('70-events-truncated-fresh.http', 'GET', `/v1/runs/${long}/events`);
  await capture('71-events-truncated-last-seq-0.http', 'GET', `/v1/runs/${long}/events?last_seq=0`);

  // 8x: Idempotency-Key: the same body twice, then another body under the same key.
  const keyed: Array<[string, string]> = [['Idempotency-Key', 'capture-key-1']];
  const first = await startRun('80-start-idempotency-key-202.http', { input: 'Reply with the single word: once' }, keyed);
  await capture('81-start-idempotency-same-body-202.http', 'POST', '/v1/runs', {
    body: JSON.stringify({ input: 'Reply with the single word: once' }),
    headers: keyed,
  });
  await capture('82-start-idempotency-other-body-409.http', 'POST', '/v1/runs', {
    body: JSON.stringify({ input: 'Reply with the single word: twice' }),
    headers: keyed,
  });
  await waitForStatus(first, isTerminal, 'a terminal status');
  await drain(first);
  await capture('83-start-idempotency-same-body-after-end-202.http', 'POST', '/v1/runs', {
    body: JSON.stringify({ input: 'Reply with the single word: once' }),
    headers: keyed,
  });

  // 9x: restarts. Runs held at approvals with and without a key, a finished keyed run; a graceful restart, then a crash.
  const graceful = scratch('cap-restart-keyed');
  const keyedHeld = await startRun(undefined, { input: `Run the shell command: rm -rf ./${graceful}` }, [['Idempotency-Key', 'capture-key-2']]);
  const plain = scratch('cap-restart-plain');
  const plainHeld = await startRun(undefined, { input: `Run the shell command: rm -rf ./${plain}` });
  for (const runId of [keyedHeld, plainHeld]) await waitForStatus(runId, (status) => status === 'waiting_for_approval', 'waiting_for_approval');
  await hermesServer.restart('graceful');
  await capture('90-status-keyed-after-graceful-restart.http', 'GET', `/v1/runs/${keyedHeld}`);
  await capture('91-status-unkeyed-after-graceful-restart.http', 'GET', `/v1/runs/${plainHeld}`);
  await capture('92-status-keyed-finished-after-restart.http', 'GET', `/v1/runs/${first}`);
  await capture('93-events-keyed-after-restart.http', 'GET', `/v1/runs/${keyedHeld}/events`);
  await capture('94-start-idempotency-replay-after-restart-202.http', 'POST', '/v1/runs', {
    body: JSON.stringify({ input: `Run the shell command: rm -rf ./${graceful}` }),
    headers: [['Idempotency-Key', 'capture-key-2']],
  });
  await capture('95-stop-interrupted-after-restart-200.http', 'POST', `/v1/runs/${keyedHeld}/stop`, { body: '{}' });
  await capture('96-approval-interrupted-after-restart-409.http', 'POST', `/v1/runs/${keyedHeld}/approval`, { body: '{"choice": "once"}' });

  const crashFolder = scratch('cap-crash-keyed');
  const crashed = await startRun(undefined, { input: `Run the shell command: rm -rf ./${crashFolder}` }, [['Idempotency-Key', 'capture-key-3']]);
  await waitForStatus(crashed, (status) => status === 'waiting_for_approval', 'waiting_for_approval');
  await hermesServer.restart('crash');
  await capture('97-status-keyed-after-crash.http', 'GET', `/v1/runs/${crashed}`);
  await capture('98-stop-after-crash-200.http', 'POST', `/v1/runs/${crashed}/stop`, { body: '{}' });
}

try {
  await main(hermes);
  console.log(`hermes:capture: ${written.length} exchanges of Hermes ${version} written to ${out}`);
  console.log(readdirSync(out).join('\n'));
} catch (error) {
  console.error(`hermes:capture: ${(error as Error).stack ?? String(error)}\n--- Hermes output (tail) ---\n${hermes.output().slice(-4000)}`);
  process.exitCode = 1;
} finally {
  await hermes.stop();
  await model.close();
}
