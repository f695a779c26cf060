import type { EndpointOffer, HermesConnector, RunEventsOutput, RunLedger } from '../../index.js';
import { typedId } from '../../internal/ids.js';
import { errorName } from '../../internal/logger.js';
import type { LoadedEndpoint } from '../config.js';
import type { CheckRecord, CleanupRecord, EndpointRecord, OfferRecord } from '../evidence.js';
import { credentialRevision } from '../../config.js';
import type { Progress } from '../progress.js';
import { readHermesIdentity } from './hermes-health.js';
import { CHECKS } from './index.js';
import { EndpointSession, describeResult, type QualifySettings } from './session.js';
import { CheckFailed, type Check } from './types.js';
import { TERMINAL_STATUSES } from '../../contract/hermes-vocabulary.js';

/** Cleanup (stop what is active, drain unread queues) gets at most this long per endpoint. */
const CLEANUP_MS = 15_000;
/** Draining one unread event queue gets at most this long. */
const DRAIN_MS = 5_000;

/** Runs the eight checks against each endpoint in turn, then cleans up after each. */
export async function qualifyEndpoints(
  endpoints: LoadedEndpoint[],
  connector: HermesConnector,
  ledger: RunLedger,
  settings: QualifySettings,
  progress: Progress,
): Promise<EndpointRecord[]> {
  const runIds = new Set<string>();
  const records: EndpointRecord[] = [];
  for (const endpoint of endpoints) {
    const session = new EndpointSession(endpoint.config, connector, ledger, settings, runIds);
    const startedAt = Date.now();
    progress.endpointStarted(endpoint.config.id, endpoint.config.baseUrl, CHECKS);
    const hermes = await readHermesIdentity(endpoint.config.baseUrl);
    const offer = offerRecord((await connector.offers())[endpoint.config.id] as EndpointOffer);
    const checks: CheckRecord[] = [];
    for (const [index, check] of CHECKS.entries()) {
      progress.checkStarted(check.id);
      const record = await runCheck(session, check, index + 1);
      checks.push(record);
      progress.checkFinished(record);
    }
    const cleanup = await cleanUp(session);
    const finishedAt = Date.now();
    const record: EndpointRecord = {
      endpoint_id: endpoint.config.id,
      display_name: endpoint.config.displayName ?? null,
      base_url: endpoint.config.baseUrl,
      hermes,
      offer,
      tenant_binding: endpoint.config.tenantId ?? null,
      credential_revision: credentialRevision(endpoint.config.apiKey),
      credential_source: endpoint.keySource,
      result: checks.every((check) => check.result === 'passed') ? 'passed' : 'failed',
      started_at: new Date(startedAt).toISOString(),
      finished_at: new Date(finishedAt).toISOString(),
      duration_ms: finishedAt - startedAt,
      checks,
      cleanup,
    };
    records.push(record);
    progress.endpointFinished(record);
  }
  return records;
}

function offerRecord({ source, read_at, durable_run_idempotency, run_steer }: EndpointOffer): OfferRecord {
  return { source, read_at: new Date(read_at).toISOString(), durable_run_idempotency, run_steer };
}

async function runCheck(session: EndpointSession, check: Check, number: number): Promise<CheckRecord> {
  const startedAt = Date.now();
  session.deadline = startedAt + session.settings.stepTimeoutMs;
  session.checkId = check.id;
  const evidence: Record<string, unknown> = {};
  let reason: string | null = null;
  if (session.settings.signal.aborted) {
    reason = 'not run: the qualification was interrupted';
  } else {
    try {
      await check.run(session, evidence);
    } catch (error) {
      reason = error instanceof CheckFailed ? error.message : `unexpected error: ${unexpectedErrorText(error)}`;
    }
    if (reason !== null && session.settings.signal.aborted) reason = `interrupted: ${reason}`;
  }
  const finishedAt = Date.now();
  return {
    id: check.id,
    number,
    title: check.title,
    result: reason === null ? 'passed' : 'failed',
    reason,
    started_at: new Date(startedAt).toISOString(),
    finished_at: new Date(finishedAt).toISOString(),
    duration_ms: finishedAt - startedAt,
    evidence,
  };
}

/** A short, code-like `code` (`57P01`, `ECONNREFUSED`, `SQLITE_BUSY`), as drivers and Node set it. */
const ERROR_CODE = /^[A-Za-z0-9_.-]{1,40}$/;

/**
 * An error no check expected, by class and code only: the evidence is written to files that are
 * shared, and a driver's message may hold its connection string or a statement.
 */
function unexpectedErrorText(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && ERROR_CODE.test(code) ? `${errorName(error)} (${code})` : errorName(error);
}

/**
 * Leaves the endpoint as it was: every run still active is stopped through the host's cancel
 * authority, and every event queue nobody read is drained (at the pin an unread queue holds a slot
 * of the concurrency gate for five minutes). Runs even after an interrupt, bounded.
 */
async function cleanUp(session: EndpointSession): Promise<CleanupRecord[]> {
  session.checkId = 'cleanup';
  session.deadline = Date.now() + Math.min(CLEANUP_MS, session.settings.stepTimeoutMs);
  session.signal = undefined;
  return Promise.all(
    [...session.runs.values()].map(async (run): Promise<CleanupRecord> => {
      const actions: string[] = [];
      const status = await session.invoke('run_status', { run_id: run.id });
      const value = status.status === 'completed' ? String((status.output as Record<string, unknown>)['status']) : undefined;
      if (value === undefined) actions.push(`status unreadable: ${describeResult(status)}`);
      if (value !== undefined && !TERMINAL_STATUSES.has(value)) {
        const action = { id: typedId('act_'), capability_id: session.cap('run_events'), input: { run_id: run.id } };
        const stop = await session.connector.cancel(action, session.context());
        actions.push(
          `was ${value}; stopped: ${stop ? (stop.status === 'completed' ? `receipt ${String((stop.output as { status?: unknown }).status)}` : describeResult(stop)) : 'nothing to stop'}`,
        );
      }
      if (run.stream === 'unread') {
        const drained = await session.invoke('run_events', { run_id: run.id }, { deadline: Math.min(session.deadline, Date.now() + DRAIN_MS) });
        const output = drained.output as RunEventsOutput | undefined;
        actions.push(`event queue drained: ${output?.terminal_event ?? describeResult(drained)}`);
      }
      if (actions.length === 0) actions.push(`nothing to do (${value})`);
      return { run_id: run.id, started_by: run.startedBy, actions };
    }),
  );
}
