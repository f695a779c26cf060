/**
 * Crash torture (issue #17, part 1): a child process runs two connector replicas and a Herm
 * bridge over one durable ledger; the parent grows a seeded plan round by round and SIGKILLs the
 * child at random instants and at targeted ones (a start, an approval, a stop or a Herm final
 * result held at a proxy before the simulator saw it, or after it answered; a webhook delivery held
 * before or after the receiver recorded it), then starts it
 * again on the same ledger. Both replicas journal their runs and deliver every event to a webhook
 * receiver here (misbehaving at times; kills also come while it holds a delivery). With PostgreSQL some rounds end the child's backends instead (and,
 * when allowed, restart the server), and the child must finish by itself. The simulators run
 * and the receiver live here, so their logs outlive every kill. See invariants.ts for what is checked.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startHermSimulator, startHermesSimulator, type HermSimulator, type HermesSimulator } from 'aip-connector-hermes-agent/simulator';
import { afterRestart, atTheEnd, deliveredAtTheEnd, duplicateStarts, finalsOf, type DeliveryVerdict, type ResultLine } from './invariants.js';
import { startKillProxy, type HoldPhase, type KillProxy, type ProxiedRequest } from './kill-proxy.js';
import { seededRandom } from '../helpers/seeded-random.js';
import { HERMES_KEY, HERM_KEY, TOOL_NAME, pick, planRound, type ChildConfig, type ChildLine, type TorturePlan } from './plan.js';
import { createPostgresStore, createSqliteStore, type TortureStore } from './stores.js';
import { startWebhookReceiver, type WebhookReceiver } from './webhook-receiver.js';

export interface TortureOptions {
  kills: number;
  ledger: 'sqlite' | 'postgres';
  seed: number;
  /** PostgreSQL server for `ledger: 'postgres'`. */
  pgUrl?: string;
  /** Restarts the PostgreSQL server this many times mid-run (a command that does it must be given). */
  pgRestarts?: number;
  pgRestartCommand?: string[];
  brokenLedger?: ChildConfig['brokenLedger'];
  log?: (line: string) => void;
}

export interface TortureSummary {
  ledger: string;
  seed: number;
  kills: number;
  rounds: number;
  kills_by_moment: Record<string, number>;
  pg_faults: { backends_terminated: number; rounds: number; server_restarts: number };
  ledger_unavailable_answers: number;
  actions: number;
  outcomes: Record<string, number>;
  hermes_starts: number;
  herm_finals: number;
  duplicates: number;
  lost: number;
  delivery: Omit<DeliveryVerdict, 'problems'> & { receiver_misbehaved: Record<string, number>; receiver_rejected: number };
  violations: string[];
  seconds: number;
}

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CHILD = fileURLToPath(new URL('./child.ts', import.meta.url));
/** A child that neither finishes nor gets killed within this is hung: the run stops with a violation. */
const WATCHDOG_MS = 120_000;
/** Rounds in which the child finished before its kill came do not count as kills; this bounds them. */
const MAX_ROUNDS_PER_KILL = 3;
/** The journal's and the outbox's lease in the child: a killed child's runs are taken over this soon. */
const JOURNAL_LEASE_MS = 2000;
/** The webhook's attempt timeout; the receiver's hangs last longer. */
const WEBHOOK_TIMEOUT_MS = 1000;
/** Share of the events whose first delivery the receiver answers badly (5xx, a hang, a garbage 2xx). */
const RECEIVER_MISBEHAVIOUR = 0.1;

type Moment = 'random' | `${'start' | 'approval' | 'stop' | 'herm-final' | 'delivery'}:${HoldPhase}` | 'pg-terminate' | 'pg-restart';
const TARGETED: Moment[] = [
  'start:before',
  'start:after',
  'approval:before',
  'approval:after',
  'stop:before',
  'stop:after',
  'herm-final:before',
  'herm-final:after',
  'delivery:before',
  'delivery:after',
];

const isPost = (request: ProxiedRequest, test: (path: string) => boolean) => request.method === 'POST' && test(request.path);
const MATCHERS: Record<string, (request: ProxiedRequest) => boolean> = {
  start: (request) => isPost(request, (path) => path === '/v1/runs'),
  approval: (request) => isPost(request, (path) => path.endsWith('/approval')),
  stop: (request) => isPost(request, (path) => path.endsWith('/stop')),
  'herm-final': (request) => isPost(request, (path) => path.endsWith('/events')) && /"status":"(completed|failed)"/.test(request.body),
};

interface Incarnation {
  child: ChildProcess;
  lines: ChildLine[];
  stderr(): string;
  /** Resolves with how the child ended. */
  ended: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function spawnChild(config: ChildConfig): Incarnation {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD], {
    cwd: ROOT,
    env: { ...process.env, TORTURE_CHILD_CONFIG: JSON.stringify(config) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: ChildLine[] = [];
  let pending = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    pending += chunk.toString('utf8');
    const complete = pending.split('\n');
    pending = complete.pop() ?? '';
    for (const line of complete) if (line.startsWith('{')) lines.push(JSON.parse(line) as ChildLine);
  });
  child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString('utf8')).slice(-4000)));
  const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, lines, stderr: () => stderr, ended };
}

/** What the child said when its deliveries did not settle in time, if it did. */
const unsettled = (incarnation: Incarnation): string => {
  const line = incarnation.lines.find((candidate) => candidate.t === 'unsettled');
  return line ? ` deliveries unsettled: ${JSON.stringify(line)}` : '';
};

async function kill(incarnation: Incarnation): Promise<void> {
  if (incarnation.child.exitCode === null && incarnation.child.signalCode === null) incarnation.child.kill('SIGKILL');
  await incarnation.ended;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

/** Resolves once the child printed `recovered` (or ended). */
async function recovered(incarnation: Incarnation): Promise<void> {
  const done = incarnation.ended.then(() => undefined);
  while (!incarnation.lines.some((line) => line.t === 'recovered')) {
    if ((await Promise.race([done.then(() => 'ended'), sleep(20).then(() => 'wait')])) === 'ended') return;
  }
}

interface World {
  hermes: HermesSimulator;
  herm: HermSimulator;
  proxies: { hermes: KillProxy; herm: KillProxy };
  receiver: WebhookReceiver;
  secretFile: string;
  store: TortureStore;
  plan: TorturePlan;
  planFile: string;
  options: TortureOptions;
  /** The database fault of the round, if any: the checks wait for it (and for the server to be back). */
  fault: Promise<void>;
}

async function startWorld(options: TortureOptions, scratch: string): Promise<World> {
  // Pin profile: Hermes itself ignores idempotency keys, so a duplicate start shows as a second run.
  const hermes = await startHermesSimulator({ apiKey: HERMES_KEY, maxConcurrentRuns: 0, approvalTimeoutMs: 5000, keepaliveMs: 1000 });
  const herm = await startHermSimulator({ apiKey: HERM_KEY, keepaliveMs: 1000 });
  const proxies = { hermes: await startKillProxy(hermes.url), herm: await startKillProxy(herm.url) };
  // Its own stream, so that the plan of a seed stays what it was without a receiver.
  const receiver = await startWebhookReceiver({
    random: seededRandom(options.seed ^ 0x5eed),
    misbehaviour: RECEIVER_MISBEHAVIOUR,
    hangMs: 3 * WEBHOOK_TIMEOUT_MS,
  });
  const secretFile = join(scratch, 'webhook.secret');
  writeFileSync(secretFile, receiver.secret, { mode: 0o600 });
  chmodSync(secretFile, 0o600);
  const store = options.ledger === 'postgres' ? await createPostgresStore(requirePgUrl(options)) : createSqliteStore();
  const planFile = join(scratch, 'plan.json');
  return { hermes, herm, proxies, receiver, secretFile, store, plan: { lifecycles: [], jobs: [] }, planFile, options, fault: Promise.resolve() };
}

function requirePgUrl(options: TortureOptions): string {
  if (!options.pgUrl) throw new Error('the PostgreSQL torture needs a server: set HERMES_TEST_PG_URL');
  return options.pgUrl;
}

async function stopWorld(world: World): Promise<void> {
  await world.proxies.hermes.close();
  await world.proxies.herm.close();
  await world.receiver.close();
  await world.herm.close();
  await world.hermes.close();
  await world.store.remove();
}

/** Adds a round's lifecycles and bridge jobs to the plan; Herm emits the jobs' tool calls now. */
function growPlan(world: World, random: () => number, round: number): void {
  const added = planRound(random, round);
  world.plan.lifecycles.push(...added.lifecycles);
  for (const job of added.jobs) {
    const event = world.herm.emitToolUse(job.sessionId, { name: TOOL_NAME, input: job.input, tool_use_id: job.toolUseId });
    world.plan.jobs.push({ sessionId: job.sessionId, event: { ...event } });
  }
  writeFileSync(world.planFile, JSON.stringify(world.plan));
}

function childConfig(world: World): ChildConfig {
  return {
    ledger: world.store.spec,
    hermesUrl: world.proxies.hermes.url,
    hermUrl: world.proxies.herm.url,
    planFile: world.planFile,
    idempotencyLeaseMs: 2000,
    jobLeaseMs: 2000,
    journalLeaseMs: JOURNAL_LEASE_MS,
    webhook: { url: world.receiver.url, secretFile: world.secretFile, timeoutMs: WEBHOOK_TIMEOUT_MS },
    ...(world.options.brokenLedger ? { brokenLedger: world.options.brokenLedger } : {}),
  };
}

/**
 * The fault of a round: a kill (random or targeted), or with PostgreSQL sometimes a database fault
 * instead, and always one while a fault is still owed (no backend ended yet on a running child, or
 * fewer server restarts than asked for; a child that finishes its plan first takes none), so that
 * every PostgreSQL torture exercises both.
 */
function chooseMoment(world: World, random: () => number, faults: TortureSummary['pg_faults']): Moment {
  if (world.options.ledger !== 'postgres') return killMoment(random);
  const restartsOwed = faults.server_restarts < (world.options.pgRestarts ?? 0);
  const terminateOwed = faults.backends_terminated === 0;
  if (!(random() < 0.25 || restartsOwed || terminateOwed)) return killMoment(random);
  return restartsOwed && (!terminateOwed || random() < 0.5) ? 'pg-restart' : 'pg-terminate';
}

const killMoment = (random: () => number): Moment => (random() < 0.4 ? 'random' : pick(random, TARGETED));

/** Arms the fault of the round; resolves when the child should be killed (never for database faults, which act by themselves). */
function armKill(world: World, moment: Moment, random: () => number, incarnation: Incarnation, faults: TortureSummary['pg_faults']): Promise<void> {
  if (moment === 'random') return sleep(200 + random() * 2500);
  if (moment === 'pg-terminate' || moment === 'pg-restart') {
    world.fault = databaseFault(world, moment, random, incarnation, faults);
    return new Promise<void>(() => undefined);
  }
  const [route, phase] = moment.split(':') as [string, HoldPhase];
  if (route === 'delivery') return world.receiver.arm(phase);
  const proxy = route === 'herm-final' ? world.proxies.herm : world.proxies.hermes;
  return proxy.arm(MATCHERS[route] as (request: ProxiedRequest) => boolean, phase);
}

async function databaseFault(world: World, moment: Moment, random: () => number, incarnation: Incarnation, faults: TortureSummary['pg_faults']): Promise<void> {
  await recovered(incarnation);
  await sleep(random() * 400);
  if (incarnation.child.exitCode !== null) return;
  faults.rounds++;
  if (moment === 'pg-terminate') {
    faults.backends_terminated += await world.store.terminateBackends();
    return;
  }
  const [command, ...args] = world.options.pgRestartCommand ?? [];
  if (!command) return;
  await new Promise<void>((resolve) => spawn(command, args, { stdio: 'ignore' }).once('exit', () => resolve()));
  faults.server_restarts++;
  await serverAnswers(world.store);
}

/** Waits (bounded) until the database answers again after a restart. */
async function serverAnswers(store: TortureStore): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt++) {
    if (
      await store.query('SELECT 1').then(
        () => true,
        () => false,
      )
    )
      return;
    await sleep(100);
  }
  throw new Error('the database did not come back within 30 s of its restart');
}

export async function runTorture(options: TortureOptions): Promise<TortureSummary> {
  const scratch = mkdtempSync(join(tmpdir(), 'aip-torture-plan-'));
  const log = options.log ?? (() => undefined);
  const started = Date.now();
  const random = seededRandom(options.seed);
  const world = await startWorld(options, scratch);
  const summary: TortureSummary = {
    ledger: options.ledger,
    seed: options.seed,
    kills: 0,
    rounds: 0,
    kills_by_moment: {},
    pg_faults: { backends_terminated: 0, rounds: 0, server_restarts: 0 },
    ledger_unavailable_answers: 0,
    actions: 0,
    outcomes: {},
    hermes_starts: 0,
    herm_finals: 0,
    duplicates: 0,
    lost: 0,
    delivery: { events_journaled: 0, deliveries: 0, duplicate_deliveries: 0, lost_events: 0, reordered: 0, receiver_misbehaved: {}, receiver_rejected: 0 },
    violations: [],
    seconds: 0,
  };
  const settled = new Map<string, string>();
  const observed = { hermes: world.hermes, herm: world.herm, plan: world.plan, store: world.store };
  try {
    while (summary.kills < options.kills && summary.rounds < options.kills * MAX_ROUNDS_PER_KILL && summary.violations.length === 0) {
      growPlan(world, random, summary.rounds++);
      const moment = chooseMoment(world, random, summary.pg_faults);
      const incarnation = spawnChild(childConfig(world));
      const outcome = await Promise.race([
        armKill(world, moment, random, incarnation, summary.pg_faults).then(() => 'kill' as const),
        incarnation.ended.then(() => 'ended' as const),
        sleep(WATCHDOG_MS).then(() => 'hung' as const),
      ]);
      world.proxies.hermes.disarm();
      world.proxies.herm.disarm();
      world.receiver.disarm();
      await kill(incarnation);
      await world.fault;
      world.fault = Promise.resolve();
      summary.ledger_unavailable_answers += incarnation.lines.filter((line) => line.t === 'unavailable').length;
      if (outcome === 'kill') {
        summary.kills++;
        summary.kills_by_moment[moment] = (summary.kills_by_moment[moment] ?? 0) + 1;
      } else if (outcome === 'hung') summary.violations.push(`round ${summary.rounds}: the child hung (${moment})`);
      else if (!incarnation.lines.some((line) => line.t === 'done'))
        summary.violations.push(`round ${summary.rounds}: the child failed (${moment}): ${incarnation.stderr()}${unsettled(incarnation)}`);
      summary.violations.push(...(await afterRestart(observed, settled)).map((problem) => `after round ${summary.rounds} (${moment}): ${problem}`));
      log(
        `round ${summary.rounds}: ${moment} -> ${outcome}; kills ${summary.kills}/${options.kills}; plan ${world.plan.lifecycles.length} lifecycles, ${world.plan.jobs.length} jobs`,
      );
    }
    await finalRun(world, summary, observed);
    summary.hermes_starts = world.hermes.startCount();
    summary.duplicates = duplicateStarts(world.hermes).length + world.plan.jobs.filter((job) => finalsOf(world.herm, job) > 1).length;
  } finally {
    await stopWorld(world);
    rmSync(scratch, { recursive: true, force: true });
  }
  summary.seconds = Math.round((Date.now() - started) / 100) / 10;
  return summary;
}

/** A last child with no fault finishes the plan; then every invariant must hold. */
async function finalRun(world: World, summary: TortureSummary, observed: Parameters<typeof atTheEnd>[0]): Promise<void> {
  const last = spawnChild(childConfig(world));
  const ended = await Promise.race([last.ended.then(() => 'ended'), sleep(WATCHDOG_MS).then(() => 'hung')]);
  await kill(last);
  if (ended === 'hung' || !last.lines.some((line) => line.t === 'done'))
    summary.violations.push(`the last child did not finish the plan: ${last.stderr()}${unsettled(last)}`);
  const verdict = await atTheEnd(
    observed,
    last.lines.filter((line): line is ResultLine => line.t === 'result'),
  );
  summary.actions = verdict.actions;
  summary.outcomes = verdict.outcomes;
  summary.lost = verdict.lost;
  summary.herm_finals = world.plan.jobs.reduce((sum, job) => sum + finalsOf(world.herm, job), 0);
  summary.violations.push(...verdict.problems.map((problem) => `at the end: ${problem}`));
  const { problems, ...delivery } = await deliveredAtTheEnd(world.store, world.receiver.arrivals);
  summary.delivery = { ...delivery, receiver_misbehaved: { ...world.receiver.misbehaved }, receiver_rejected: world.receiver.rejected };
  summary.violations.push(...problems.map((problem) => `at the end (delivery): ${problem}`));
  if (world.receiver.rejected > 0) summary.violations.push(`at the end (delivery): ${world.receiver.rejected} deliveries failed verification`);
}
