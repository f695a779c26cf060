/**
 * 8. The AIP remote connector host: `run_status` as a signed action through the host that `hermes-aip
 * host` runs (`openHost` of the built package: its message handler, HTTP server, lease keeper and SQLite
 * ledger in this process), driven over loopback by the runtime double of test/helpers/aip-runtime in
 * another process (bench/host-runtime.ts: signed envelope in, signed action_result out, every answer
 * verified), against `connector.invoke()` called directly in this process with a SQLite ledger too,
 * both on the bench's Hermes stand-in (a third process). While the double drives the host, this
 * process does nothing but serve, so its CPU per action is the host's.
 *
 * The checked figure is the host's own processing per action (issue #33, item 6): the host's CPU minus
 * what it cannot do without, each measured in the same round and the same way: the `invoke()` it makes
 * (the direct call's CPU), the wire floor (a bare node:http server in this process reading the same
 * request bytes from the same driver and answering as many bytes), the durable replay claim (one SQLite
 * `claimMessage`), and one Ed25519 pair (one verification and one signature over an action envelope's
 * canonical bytes, timed alone). Expressed in pairs; target: at most 1.5.
 *
 * Beside it, the protocol floor (bench/protocol-floor.ts), driven with the same request bytes and put through the same
 * accounting: what that accounting leaves to a host that does nothing but the protocol's unavoidable steps.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { type AipActionResult, createHermesConnector, createSqliteLedger, type HermesConnector, type RunLedger } from 'aip-connector-hermes-agent';
import { pino } from 'pino';
import type { OpenHost } from '../src/host/command.js';
import { actionDeadline } from '../src/host/execute.js';
import type { Envelope } from '../src/host/wire/envelope.js';
import { canonicalJson } from '../src/host/wire/json.js';
import { type SigningKey, signingKeyFromSeed, verifyWithDid } from '../src/host/wire/keys.js';
import { GATEWAY_PRINCIPAL_ID, TENANT_ID, TRUST_DOMAIN } from '../test/helpers/aip-runtime/deployment.js';
import { capability, runAction, waitForReady } from '../test/helpers/aip-runtime/deployment-fixture.js';
import { freePort, hostEnvironment, writeHostFiles } from '../test/helpers/aip-runtime/launcher.js';
import { startEchoServer, type EchoServer } from './echo-server.js';
import { startRemoteRuntime, type RemoteRuntime, type TimedCalls } from './host-runtime.js';
import { type ProtocolFloor, startProtocolFloor } from './protocol-floor.js';
import { pairedFigure, type BenchSettings, type Figure, type Log, type SectionResult } from './report.js';
import { BENCH_API_KEY, STATUS_RUN_ID, startBenchServer } from './servers.js';
import { cpuMicros, interleave, mean, summarize } from './stats.js';

/** The host's own processing per action, in Ed25519 verify + sign pairs. */
const TARGET_PAIRS = 1.5;
/** The built host, as `hermes-aip host` runs it (the bench's other imports of src/ are the runtime's side and the pair). */
const BUILT_HOST = new URL('../dist/host/command.js', import.meta.url).href;

interface Slice {
  calls: number;
  seconds: number;
  /** This process's CPU over the slice: the host's, the bare server's, the direct call's or the signature work's. */
  cpu_us: number;
}

interface Round {
  calls: number;
  latency_us: number;
  cpu_us_per_call: number;
}

type Side = 'direct' | 'host' | 'floor' | 'ed25519' | 'wire' | 'claim';

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

async function timed(calls: number, call: () => Promise<void> | void): Promise<Slice> {
  const cpuBefore = cpuMicros();
  const started = performance.now();
  for (let i = 0; i < calls; i++) await call();
  return { calls, seconds: (performance.now() - started) / 1000, cpu_us: cpuMicros() - cpuBefore };
}

/** Calls the runtime double makes to a server in this process: the slice's CPU is this process's, its time the driver's. */
async function driven(calls: number, drive: (calls: number) => Promise<TimedCalls>): Promise<Slice> {
  const cpuBefore = cpuMicros();
  const { seconds } = await drive(calls);
  return { calls, seconds, cpu_us: cpuMicros() - cpuBefore };
}

/**
 * `invoke()` as the host calls it for the same action: the verified tenant in the action, and the context the host
 * builds (the gateway as actor, an abort signal, the correlation id as trace, the contract's deadline). The connector
 * checks and follows each of them (the signal is listened to for the call), so a bare context undercounts the call.
 */
function invokeAsHost(connector: HermesConnector): (actionId?: string) => Promise<AipActionResult> {
  const signal = new AbortController().signal;
  const timeoutMs = actionDeadline(connector, runAction('run_status', STATUS_RUN_ID), 0);
  return (actionId) => {
    const action = runAction('run_status', STATUS_RUN_ID, { identity: { tenant: { id: TENANT_ID } }, ...(actionId === undefined ? {} : { id: actionId }) });
    return connector.invoke(action, {
      tenantId: TENANT_ID,
      actor: { principalId: GATEWAY_PRINCIPAL_ID, issuer: TRUST_DOMAIN },
      signal,
      traceId: `corr_${action.id}`,
      ...(timeoutMs === undefined ? {} : { deadline: Date.now() + timeoutMs }),
    });
  };
}

function directCall(invoke: () => Promise<AipActionResult>): () => Promise<void> {
  return async () => {
    const result = await invoke();
    if (result.status !== 'completed') throw new Error(`invoke() answered ${result.status}: ${JSON.stringify(result.error)}`);
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
function signatureWork(envelopeText: string, gatewayDid: string, hostKey: SigningKey): () => void {
  const envelope = JSON.parse(envelopeText) as Envelope;
  const { signature, ...security } = envelope.security as Record<string, string>;
  const bytes = canonicalJson({ ...envelope, security });
  return () => {
    if (!verifyWithDid(gatewayDid, bytes, signature!)) throw new Error('the benchmark envelope does not verify');
    hostKey.sign(bytes);
  };
}

interface InProcessHost {
  readonly host: OpenHost;
  readonly origin: string;
  readonly seedHex: string;
}

/** The built host in this process, with the files and variables the launcher gives a host process, registered and ready. */
async function startInProcessHost(runtime: RemoteRuntime, hermesUrl: string, folder: string): Promise<InProcessHost> {
  const seedHex = randomBytes(32).toString('hex');
  const { seedPath, configPath } = writeHostFiles(folder, seedHex, { url: hermesUrl, apiKey: BENCH_API_KEY });
  const env = hostEnvironment(await runtime.describe(), {
    ledger: { kind: 'sqlite', path: join(folder, 'host.sqlite') },
    folder,
    seedPath,
    port: await freePort(),
  });
  const { openHost } = (await import(BUILT_HOST)) as typeof import('../src/host/command.js');
  const host = await openHost(env, configPath, pino({ name: 'hermes-aip-host', level: 'warn' }, pino.destination({ fd: 2, sync: true })));
  const origin = `http://127.0.0.1:${host.address.port}`;
  try {
    const { id, kind, trust_domain, did } = host.principal;
    await runtime.trust(origin, { did: did!, principal: { id, kind, trust_domain, did }, replicaId: host.replicaId });
    await host.register();
    await waitForReady({ origin }, 200);
  } catch (error) {
    await host.close();
    throw error;
  }
  return { host, origin, seedHex };
}

export async function benchHost(settings: BenchSettings, log: Log): Promise<SectionResult> {
  const plan = settings.quick ? { slices: 3, calls: 300, pairs: 2_000, warmActions: 2_000 } : { slices: 5, calls: 500, pairs: 4_000, warmActions: 4_000 };
  const server = await startBenchServer([]);
  const runtime = await startRemoteRuntime();
  const folder = mkdtempSync(join(tmpdir(), 'hermes-aip-bench-host-'));
  let served: InProcessHost | undefined;
  let connector: HermesConnector | undefined;
  let claims: RunLedger | undefined;
  let echo: EchoServer | undefined;
  let floor: ProtocolFloor | undefined;
  let floorClaims: RunLedger | undefined;
  try {
    served = await startInProcessHost(runtime, server.origin, folder);
    // The same kind of durable ledger the host keeps, so the difference is what serving over the wire adds.
    const ledger = createSqliteLedger({ path: join(folder, 'direct.sqlite') });
    connector = createHermesConnector({ endpoints: [{ id: 'local', baseUrl: server.origin, apiKey: BENCH_API_KEY, tenantId: TENANT_ID }], ledger });
    const invoke = invokeAsHost(connector);
    const direct = directCall(invoke);
    const { answerBytes } = await runtime.actions(1);
    echo = await startEchoServer(answerBytes);
    const echoUrl = `${echo.origin}/aip/v1/messages`;
    const { gatewayDid } = await runtime.describe();
    const hostKey = signingKeyFromSeed(Buffer.from(served.seedHex, 'hex'));
    const pair = signatureWork(await runtime.envelope(), gatewayDid, hostKey);
    claims = createSqliteLedger({ path: join(folder, 'claims.sqlite') });
    const claim = claimCall(claims);
    floorClaims = createSqliteLedger({ path: join(folder, 'floor.sqlite') });
    floor = await startProtocolFloor({ gatewayDid, key: hostKey, claims: floorClaims, invoke });
    const floorUrl = floor.url;
    // V8 keeps optimising the host's path for the first few thousand actions (measured with --trace-opt: 2.7 s of
    // compilation in the first 1,000 actions, under 0.04 s per 1,000 after 7,000): a host serves long past that.
    await runtime.actions(plan.warmActions);
    await runtime.wire(plan.warmActions, floorUrl);
    log(
      `  ${capability('run_status')}: ${plan.warmActions} actions to warm the host and the protocol floor up, then ${settings.rounds} rounds x ${plan.slices} alternating slices x ${plan.calls} sequential calls per side; ${plan.pairs} Ed25519 pairs per slice`,
    );
    const measured = await interleave<Slice, Side, Round>(
      {
        direct: () => timed(plan.calls, direct),
        host: () => driven(plan.calls, (calls) => runtime.actions(calls)),
        floor: () => driven(plan.calls, (calls) => runtime.wire(calls, floorUrl)),
        ed25519: () => timed(plan.pairs, pair),
        wire: () => driven(plan.calls, (calls) => runtime.wire(calls, echoUrl)),
        claim: () => timed(plan.calls, claim),
      },
      { rounds: settings.rounds, warmupRounds: settings.warmupRounds, slices: plan.slices, merge },
    );
    if (floor.failures > 0) throw new Error(`the protocol floor could not answer ${floor.failures} request(s) with a signed result`);
    return hostSection(plan, measured.rounds, measured.records);
  } finally {
    await connector?.close();
    await claims?.close();
    await floor?.close();
    await floorClaims?.close();
    await echo?.close();
    if (served) {
      await served.host.shutdown();
      await served.host.close();
    }
    await runtime.close();
    await server.close();
    rmSync(folder, { recursive: true, force: true });
  }
}

function hostSection(
  plan: { slices: number; calls: number; pairs: number; warmActions: number },
  rounds: Record<Side, Round[]>,
  records: SectionResult['rounds'],
): SectionResult {
  const cpu = (side: Side) => rounds[side].map((round) => round.cpu_us_per_call);
  const inPairs = (side: Side) => cpu(side).map((value, i) => value / cpu('ed25519')[i]!);
  /** `side`'s CPU per action minus invoke()'s, in pairs. */
  const addedOf = (side: Side) => cpu(side).map((value, i) => (value - cpu('direct')[i]!) / cpu('ed25519')[i]!);
  /** What the accounting leaves to `side` of its CPU: minus invoke(), the wire floor, the replay claim and one pair. */
  const ownOf = (side: Side) => addedOf(side).map((added, i) => added - 1 - inPairs('wire')[i]! - inPairs('claim')[i]!);
  const addedPairs = addedOf('host');
  const ownPairs = ownOf('host');
  const own: Figure = {
    ...pairsFigure(
      'host.own_work_in_pairs',
      "the host's own processing per action: host CPU - invoke() - wire floor - replay claim - 1 pair (decoding, checks, the answer)",
      ownPairs,
    ),
    target: { op: '<=', value: TARGET_PAIRS, judgedOn: 'median' },
    note: `one pair = ${mean(cpu('ed25519')).toFixed(1)} us here`,
  };
  return {
    id: 'host',
    title: 'AIP remote connector host in this process (run_status action from a runtime double in another) vs invoke()',
    config: {
      slices_per_round: plan.slices,
      calls_per_slice: plan.calls,
      ed25519_pairs_per_slice: plan.pairs,
      warm_up_actions: plan.warmActions,
      ledger: 'a SQLite file on both sides',
      concurrency: 1,
    },
    figures: [
      pairedFigure(
        { id: 'host.latency', label: 'run_status latency, sequential: through the host vs invoke()', unit: 'us', ratioLabel: 'host / invoke()' },
        rounds.direct.map((round) => round.latency_us),
        rounds.host.map((round) => round.latency_us),
      ),
      pairedFigure(
        { id: 'host.cpu_per_action', label: 'CPU per action: the host vs a direct invoke(), both in this process', unit: 'us', ratioLabel: 'host / invoke()' },
        cpu('direct'),
        cpu('host'),
      ),
      pairsFigure('host.added_cpu_in_signature_pairs', "host CPU per action minus invoke() CPU per call (issue #23's figure)", addedPairs),
      pairsFigure('host.wire_floor_in_pairs', 'of which the wire floor: a bare node:http server in this process answering the same bytes', inPairs('wire')),
      pairsFigure('host.replay_claim_in_pairs', 'of which the durable replay claim alone (one SQLite claimMessage)', inPairs('claim')),
      own,
      pairsFigure(
        'host.protocol_floor_own_in_pairs',
        'the same accounting of the protocol floor (bench/protocol-floor.ts: JSON.parse, signer and signature, claim, invoke(), a signed answer, nothing else)',
        ownOf('floor'),
      ),
      pairsFigure(
        'host.own_beyond_floor_in_pairs',
        "the host's CPU per action minus the protocol floor's: what the reference's checks and exact JSON cost",
        inPairs('host').map((value, i) => value - inPairs('floor')[i]!),
      ),
    ],
    rounds: records,
    errors: [],
  };
}
