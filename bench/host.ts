/**
 * 8. The AIP remote connector host: `run_status` as an action through the built `hermes-aip
 * host` (a child process, driven by the runtime double of test/helpers/aip-runtime: signed
 * envelope in, signed action_result out, every response verified) against `connector.invoke()`
 * called directly in this process (with a SQLite ledger too), both on the bench's Hermes stand-in. The host's CPU per
 * action (user + system of the host process, from /proc) minus the direct call's CPU per call
 * is what serving over the wire adds; it is compared with the Ed25519 work the host cannot
 * avoid per action (one verification and one signature over an action envelope's canonical
 * bytes, timed alone in this process, same round). Target: at most 2 such pairs.
 *
 * Context, same rounds, to show where the added CPU goes: the wire floor (a bare node:http server
 * in its own process reading the same request bytes and answering as many bytes, its CPU per
 * request) and the durable replay claim alone (one `claimMessage` on a SQLite ledger). What is
 * left after those and the pair is the host's own processing (decoding, checks, the answer).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createHermesConnector, createSqliteLedger, type HermesConnector, type RunLedger } from 'aip-connector-hermes-agent';
import { canonicalJson } from '../src/host/wire/json.js';
import { signingKeyFromSeed, verifyWithDid } from '../src/host/wire/keys.js';
import { TENANT_ID } from '../test/helpers/aip-runtime/deployment.js';
import { capability, runAction, waitForReady } from '../test/helpers/aip-runtime/deployment-fixture.js';
import { launchHost, stopHosts, type HostProcess } from '../test/helpers/aip-runtime/launcher.js';
import { startAipRuntime, type AipRuntime } from '../test/helpers/aip-runtime/runtime.js';
import { pairedFigure, type BenchSettings, type Figure, type Log, type SectionResult } from './report.js';
import { request } from 'undici';
import { startEchoServer } from './echo-server.js';
import { BENCH_API_KEY, STATUS_RUN_ID, startBenchServer } from './servers.js';
import { cpuMicros, interleave, mean, summarize } from './stats.js';

/** Host CPU added per action, in Ed25519 verify + sign pairs. */
const TARGET_PAIRS = 2;
const CLOCK_TICKS_PER_S = 100;

interface Slice {
  calls: number;
  seconds: number;
  /** The CPU this comparison charges: the host process's for the host side, this process's for the direct side and the signature work. */
  cpu_us: number;
}

interface Round {
  calls: number;
  latency_us: number;
  cpu_us_per_call: number;
}

type Side = 'direct' | 'host' | 'ed25519' | 'wire' | 'claim';

function pairsFigure(id: string, label: string, values: number[]): Figure {
  return { id, label, unit: 'pairs', ratio: summarize(values), ratioLabel: 'in Ed25519 verify + sign pairs measured in the same round' };
}

function merge(slices: Slice[]): Round {
  const calls = slices.reduce((sum, slice) => sum + slice.calls, 0);
  return {
    calls,
    latency_us: (slices.reduce((sum, slice) => sum + slice.seconds, 0) / calls) * 1e6,
    cpu_us_per_call: slices.reduce((sum, slice) => sum + slice.cpu_us, 0) / calls,
  };
}

/** user + system CPU of another process, from /proc/<pid>/stat (Linux; clock-tick resolution, so slices are long). */
function processCpuMicros(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_S) * 1e6;
}

async function timed(calls: number, call: () => Promise<void> | void, cpu: () => number): Promise<Slice> {
  const cpuBefore = cpu();
  const started = performance.now();
  for (let i = 0; i < calls; i++) await call();
  return { calls, seconds: (performance.now() - started) / 1000, cpu_us: cpu() - cpuBefore };
}

const ownCpu = () => cpuMicros();

function directCall(connector: HermesConnector): () => Promise<void> {
  return async () => {
    const result = await connector.invoke(runAction('run_status', STATUS_RUN_ID), { tenantId: TENANT_ID });
    if (result.status !== 'completed') throw new Error(`invoke() answered ${result.status}: ${JSON.stringify(result.error)}`);
  };
}

function hostCall(runtime: AipRuntime, host: HostProcess): () => Promise<void> {
  return async () => {
    const outcome = await runtime.dispatcher.invoke(host.target, runAction('run_status', STATUS_RUN_ID));
    if (outcome.verdict.failed.length > 0 || outcome.verdict.actionResult?.status !== 'completed') {
      throw new Error(`the host answered ${outcome.exchange.status}: ${outcome.verdict.failed.join('; ') || outcome.exchange.text.slice(0, 300)}`);
    }
  };
}

/** The action's request bytes POSTed to the bare server, its answer read whole. */
function wireCall(origin: string, text: string): () => Promise<void> {
  return async () => {
    const response = await request(`${origin}/aip/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text });
    await response.body.arrayBuffer();
  };
}

/** One replay claim of a new message id, as the host makes for each action. */
function claimCall(ledger: RunLedger): () => Promise<void> {
  let claims = 0;
  return async () => {
    if (!(await ledger.claimMessage({ message_id: `msg_bench_${++claims}`, expires_at: Date.now() + 300_000 }, Date.now()))) {
      throw new Error('a new message id was refused as a replay');
    }
  };
}

/** One Ed25519 verification and one signature over the canonical bytes of an action envelope the runtime sends. */
function signatureWork(runtime: AipRuntime, host: HostProcess): () => void {
  const prepared = runtime.dispatcher.prepareAction(host.target, runAction('run_status', STATUS_RUN_ID));
  const { signature: _signature, ...security } = prepared.envelope.security as Record<string, unknown>;
  const bytes = canonicalJson({ ...prepared.envelope, security });
  const signature = (prepared.envelope.security as Record<string, string>)['signature']!;
  const hostKey = signingKeyFromSeed(Buffer.from(host.seedHex, 'hex'));
  return () => {
    if (!verifyWithDid(runtime.gateway.key.did, bytes, signature)) throw new Error('the benchmark envelope does not verify');
    hostKey.sign(bytes);
  };
}

export async function benchHost(settings: BenchSettings, log: Log): Promise<SectionResult> {
  const plan = settings.quick ? { slices: 3, calls: 300, pairs: 2_000 } : { slices: 5, calls: 500, pairs: 4_000 };
  const server = await startBenchServer([]);
  const runtime = await startAipRuntime();
  let connector: HermesConnector | undefined;
  let claims: RunLedger | undefined;
  let echo: Awaited<ReturnType<typeof startEchoServer>> | undefined;
  const folder = mkdtempSync(join(tmpdir(), 'hermes-aip-bench-host-'));
  try {
    const host = await launchHost({ runtime, hermes: { url: server.origin, apiKey: BENCH_API_KEY } });
    await waitForReady(host, 200);
    // The same kind of durable ledger the host keeps, so the difference is what serving over the wire adds.
    const ledger = createSqliteLedger({ path: join(folder, 'direct.sqlite') });
    connector = createHermesConnector({ endpoints: [{ id: 'local', baseUrl: server.origin, apiKey: BENCH_API_KEY, tenantId: TENANT_ID }], ledger });
    const direct = directCall(connector);
    const viaHost = hostCall(runtime, host);
    const pair = signatureWork(runtime, host);
    const hostPid = host.child.pid!;
    const sample = await runtime.dispatcher.invoke(host.target, runAction('run_status', STATUS_RUN_ID));
    echo = await startEchoServer(Buffer.byteLength(sample.exchange.text));
    const wire = wireCall(echo.origin, runtime.dispatcher.prepareAction(host.target, runAction('run_status', STATUS_RUN_ID)).text);
    claims = createSqliteLedger({ path: join(folder, 'claims.sqlite') });
    const claim = claimCall(claims);
    const echoPid = echo.pid;
    log(
      `  ${capability('run_status')}: ${settings.rounds} rounds x ${plan.slices} alternating slices x ${plan.calls} sequential calls per side; ${plan.pairs} Ed25519 pairs per slice`,
    );
    const measured = await interleave<Slice, Side, Round>(
      {
        direct: () => timed(plan.calls, direct, ownCpu),
        host: () => timed(plan.calls, viaHost, () => processCpuMicros(hostPid)),
        ed25519: () => timed(plan.pairs, pair, ownCpu),
        wire: () => timed(plan.calls, wire, () => processCpuMicros(echoPid)),
        claim: () => timed(plan.calls, claim, ownCpu),
      },
      { rounds: settings.rounds, warmupRounds: settings.warmupRounds, slices: plan.slices, merge },
    );
    const cpu = (side: Side) => measured.rounds[side].map((round) => round.cpu_us_per_call);
    const inPairs = (side: Side) => cpu(side).map((value, i) => value / cpu('ed25519')[i]!);
    const addedPairs = cpu('host').map((hostCpu, i) => (hostCpu - cpu('direct')[i]!) / cpu('ed25519')[i]!);
    const ownPairs = addedPairs.map((added, i) => added - 1 - inPairs('wire')[i]! - inPairs('claim')[i]!);
    const added: Figure = {
      id: 'host.added_cpu_in_signature_pairs',
      label: 'host CPU per action minus invoke() CPU per call, in Ed25519 verify + sign pairs',
      unit: 'pairs',
      ratio: summarize(addedPairs),
      ratioLabel: '(host process CPU - direct invoke() CPU) / (one verification + one signature)',
      target: { op: '<=', value: TARGET_PAIRS, judgedOn: 'median' },
      note: `one pair = ${mean(cpu('ed25519')).toFixed(1)} us here`,
    };
    return {
      id: 'host',
      title: 'AIP remote connector host (run_status action over the wire vs invoke())',
      config: {
        slices_per_round: plan.slices,
        calls_per_slice: plan.calls,
        ed25519_pairs_per_slice: plan.pairs,
        ledger: 'a SQLite file on both sides',
        concurrency: 1,
      },
      figures: [
        pairedFigure(
          { id: 'host.latency', label: 'run_status latency, sequential: through the host vs invoke()', unit: 'us', ratioLabel: 'host / invoke()' },
          measured.rounds.direct.map((round) => round.latency_us),
          measured.rounds.host.map((round) => round.latency_us),
        ),
        pairedFigure(
          { id: 'host.cpu_per_action', label: 'CPU per action: host process vs direct invoke() in this process', unit: 'us', ratioLabel: 'host / invoke()' },
          cpu('direct'),
          cpu('host'),
        ),
        added,
        pairsFigure('host.wire_floor_in_pairs', 'of which the wire floor: a bare node:http server answering the same bytes, CPU per request', inPairs('wire')),
        pairsFigure('host.replay_claim_in_pairs', 'of which the durable replay claim alone (one SQLite claimMessage)', inPairs('claim')),
        pairsFigure('host.own_work_in_pairs', 'of which the rest: decoding, route checks, the answer (added - 1 pair - wire floor - claim)', ownPairs),
      ],
      rounds: measured.records,
      errors: [],
    };
  } finally {
    await connector?.close();
    await claims?.close();
    await echo?.close();
    await stopHosts();
    await runtime.close();
    await server.close();
    rmSync(folder, { recursive: true, force: true });
  }
}
