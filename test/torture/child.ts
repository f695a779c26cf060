/**
 * The torture child: two connector replicas (each with its own ledger over ONE durable store)
 * and a Herm bridge, carrying out the whole plan against the parent's simulators. The parent
 * SIGKILLs it at any instant and starts it again on the same store: it then runs reconcile()
 * and recover() and resubmits every planned action with the same ids and keys. It prints one
 * JSON line per event (plan.ts `ChildLine`) and exits 0 once everything has an outcome and every
 * journaled event was delivered to the parent's webhook receiver.
 *
 * Input: TORTURE_CHILD_CONFIG, JSON of plan.ts `ChildConfig`.
 */
import { readFileSync } from 'node:fs';
import {
  createHermBridge,
  createHermesConnector,
  createPostgresLedger,
  createSqliteLedger,
  type AipAction,
  type AipActionResult,
  type ExecutionContext,
  type DeliveryRecord,
  type HermesConnector,
  type RunLedger,
} from 'aip-connector-hermes-agent';
import { broken } from './broken-ledger.js';
import {
  ENDPOINT_ID,
  FOLLOW_UP,
  HERMES_KEY,
  HERM_KEY,
  START,
  actionName,
  capabilityOf,
  keyOf,
  scriptOf,
  type ChildConfig,
  type ChildLine,
  type Lifecycle,
  type TorturePlan,
} from './plan.js';

const config = JSON.parse(process.env.TORTURE_CHILD_CONFIG ?? '') as ChildConfig;
const plan = JSON.parse(readFileSync(config.planFile, 'utf8')) as TorturePlan;
const UNAVAILABLE = 'connector.hermes_agent.ledger_unavailable';
/** How often a call refused with ledger_unavailable is tried again (250 ms apart): a PostgreSQL restart fits well inside. */
const UNAVAILABLE_ATTEMPTS = 240;
/** Statuses after which waiting for an approval request is over. */
const ENDED = new Set(['waiting_for_approval', 'completed', 'failed', 'cancelled', 'interrupted']);
/** Lifecycles carried out at once. */
const PARALLEL = 6;
/** How long the child waits for every delivery to settle once its plan is done (100 ms apart), before giving up without `done`. */
const SETTLE_CHECKS = 900;

const say = (line: ChildLine) => process.stdout.write(`${JSON.stringify(line)}\n`);
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function openLedger(): RunLedger {
  const ledger =
    config.ledger.kind === 'sqlite'
      ? createSqliteLedger({ path: config.ledger.path })
      : createPostgresLedger({ connectionString: config.ledger.connectionString });
  return config.brokenLedger ? broken(ledger, config.brokenLedger) : ledger;
}

const ledgers = [openLedger(), openLedger()];
const replicas = ledgers.map((ledger) =>
  createHermesConnector({
    endpoints: [{ id: ENDPOINT_ID, baseUrl: config.hermesUrl, apiKey: HERMES_KEY }],
    ledger,
    idempotencyLeaseMs: config.idempotencyLeaseMs,
    journal: { leaseMs: config.journalLeaseMs },
    webhooks: [{ url: config.webhook.url, secretFile: config.webhook.secretFile, allowLoopbackHttp: true, timeoutMs: config.webhook.timeoutMs }],
    // Nothing may be given up in the torture: the receiver is always eventually available.
    delivery: { leaseMs: config.journalLeaseMs, maxAgeMs: 30 * 24 * 60 * 60 * 1000 },
  }),
) as [HermesConnector, HermesConnector];
const bridge = createHermBridge({
  herm: { baseUrl: config.hermUrl, apiKey: HERM_KEY },
  connector: replicas[0],
  endpointId: ENDPOINT_ID,
  ledger: ledgers[0] as RunLedger,
  bridgeId: 'torture-bridge',
  jobLeaseMs: config.jobLeaseMs,
  finalRetry: { attempts: 8, baseDelayMs: 10, maxDelayMs: 200 },
  statusPoll: { baseDelayMs: 20, maxDelayMs: 200 },
});

/** Retries a step while the ledger is unreachable (nothing was sent then), reporting each refusal. */
async function whileUnavailable<T>(name: string, step: () => Promise<T>, unavailable: (value: T) => boolean): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const value = await step();
    if (!unavailable(value) || attempt >= UNAVAILABLE_ATTEMPTS) return value;
    say({ t: 'unavailable', action: name });
    await pause(250);
  }
}

/** A setup step (reconcile, recover, a bridge event) that throws while the ledger is down. */
async function untilLedgerAnswers(name: string, step: () => Promise<unknown>): Promise<void> {
  await whileUnavailable(
    name,
    () =>
      step().then(
        () => true,
        () => false,
      ),
    (ok) => !ok,
  );
}

function report(name: string, result: AipActionResult | null): AipActionResult | null {
  const output = result?.output as { run_id?: unknown } | undefined;
  say({
    t: 'result',
    action: name,
    status: result?.status ?? 'nothing_to_stop',
    code: result?.error?.code ?? null,
    replayed: result?.receipt?.replayed === true,
    run_id: typeof output?.run_id === 'string' ? output.run_id : null,
  });
  return result;
}

async function invoke(replica: HermesConnector, name: string, action: AipAction, context: ExecutionContext): Promise<AipActionResult> {
  const result = await whileUnavailable(
    name,
    () => replica.invoke(action, context),
    (value) => value.error?.code === UNAVAILABLE,
  );
  return report(name, result) as AipActionResult;
}

function grant(lifecycle: Lifecycle, step: string, input: unknown) {
  const now = Date.now();
  return {
    approvalId: `grant-${lifecycle.id}-${step}`,
    decision: 'approved' as const,
    grantedAt: now - 1000,
    expiresAt: now + 10 * 60_000,
    evidence: { reason: 'torture', inputSnapshot: input, policyDecision: { policy: 'torture', outcome: 'allow' } },
  };
}

function startAction(lifecycle: Lifecycle): AipAction {
  return {
    id: actionName(lifecycle, START),
    capability_id: capabilityOf('run_start'),
    input: { body: { input: lifecycle.id, sim_script: scriptOf(lifecycle.kind) } },
    idempotency_key: keyOf(lifecycle, START),
  };
}

/** Polls the run's status until it waits for approval or ended (bounded); the approval is sent either way. */
async function waitForApproval(replica: HermesConnector, runId: string, context: ExecutionContext): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const status = await replica.invoke({ id: `status-${runId}-${attempt}`, capability_id: capabilityOf('run_status'), input: { run_id: runId } }, context);
    const state = (status.output as { status?: string } | undefined)?.status;
    if (status.status !== 'completed' || state === undefined || ENDED.has(state)) return;
    await pause(20);
  }
}

async function followUp(lifecycle: Lifecycle, replica: HermesConnector, runId: string, fresh: boolean, context: ExecutionContext): Promise<void> {
  const step = FOLLOW_UP[lifecycle.kind];
  const name = step ? actionName(lifecycle, step) : '';
  if (lifecycle.kind === 'events') {
    // A stream is read once: a replayed start's events were read (or lost) by an earlier process.
    if (fresh) await replica.invoke({ id: `events-${lifecycle.id}`, capability_id: capabilityOf('run_events'), input: { run_id: runId } }, context);
  } else if (lifecycle.kind === 'approval') {
    await waitForApproval(replica, runId, context);
    const input = { run_id: runId, choice: 'once' };
    await invoke(
      replica,
      name,
      { id: name, capability_id: capabilityOf('run_approval'), input, idempotency_key: keyOf(lifecycle, 'approve') },
      { ...context, approval: grant(lifecycle, 'approve', input) },
    );
  } else if (lifecycle.kind === 'stop') {
    const input = { run_id: runId };
    await invoke(
      replica,
      name,
      { id: name, capability_id: capabilityOf('run_stop'), input, idempotency_key: keyOf(lifecycle, 'stop') },
      { ...context, approval: grant(lifecycle, 'stop', input) },
    );
  } else {
    report(
      name,
      await whileUnavailable(
        name,
        () => replica.cancel(startAction(lifecycle), context),
        (value) => value?.error?.code === UNAVAILABLE,
      ),
    );
  }
}

async function carryOut(lifecycle: Lifecycle): Promise<void> {
  const context: ExecutionContext = { tenantId: lifecycle.tenant };
  const replica = replicas[lifecycle.replica];
  const name = actionName(lifecycle, START);
  const sends = [invoke(replica, name, startAction(lifecycle), context)];
  if (lifecycle.duplicate) sends.push(invoke(replicas[1 - lifecycle.replica] as HermesConnector, name, startAction(lifecycle), context));
  const [start] = await Promise.all(sends);
  const runId = (start?.output as { run_id?: string } | undefined)?.run_id;
  // No run to follow: the start's outcome is unknown or it failed; its follow-up is not sent.
  if (start?.status !== 'completed' || runId === undefined) return;
  await followUp(lifecycle, replica, runId, start.receipt?.replayed !== true, context);
}

async function inParallel<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await work(items[next++] as T);
  };
  await Promise.all(Array.from({ length: limit }, worker));
}

/**
 * Waits (bounded) until no delivery is pending: every journal closed (the followers close them when
 * the runs end; a killed predecessor's are taken over after their lease) and all its events delivered.
 */
async function deliveriesSettled(): Promise<boolean> {
  let pending: DeliveryRecord[] | null = null;
  for (let check = 0; check < SETTLE_CHECKS; check++) {
    pending = await replicas[0].deliveries(undefined, { state: 'pending', limit: 1000 }).catch(() => null);
    if (pending?.length === 0) return true;
    await pause(100);
  }
  say({ t: 'unsettled', pending: pending ?? 'unreadable', now: Date.now() });
  return false;
}

say({ t: 'ready', pid: process.pid });
await untilLedgerAnswers('reconcile', () => replicas[0].reconcile());
await untilLedgerAnswers('recover', () => bridge.recover());
say({ t: 'recovered' });
await Promise.all([
  inParallel(plan.lifecycles, PARALLEL, carryOut),
  inParallel(plan.jobs, 2, (job) => untilLedgerAnswers(`job:${job.sessionId}`, () => bridge.handleEvent(job.sessionId, job.event))),
]);
await bridge.idle();
if (await deliveriesSettled()) say({ t: 'done' });
await bridge.close();
for (const replica of replicas) await replica.close();
for (const ledger of ledgers) await ledger.close();
