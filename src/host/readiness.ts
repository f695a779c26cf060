/**
 * Readiness as the reference host reports it (`host_ready`): the connector's own probe and the
 * runtime storage's, each bounded by AIP_CONNECTOR_HOST_HEALTH_TIMEOUT_MS, recorded in the host
 * status (heartbeats carry them as `connector_ready`), and the `/ready` body. Concurrent probes
 * share one round, so a thousand `/ready` polls make one Hermes health call, not a thousand.
 */
import type { RunLedger } from '../ledger/types.js';
import type { HostStatus } from './metrics.js';
import type { ReadyReport } from './server.js';
import { timeArray } from './wire/time.js';

export interface ProbeResult {
  readonly ready: boolean;
  readonly detail: string;
}

export interface ReadinessOptions {
  readonly status: HostStatus;
  /** The Hermes endpoints: each must answer `GET /health` 2xx. */
  readonly endpoints: ReadonlyArray<{ readonly id: string; readonly baseUrl: string }>;
  readonly ledger: RunLedger;
  readonly timeoutMs: number;
  readonly startedAtMs: number;
}

export interface Readiness {
  /** Probes connector and storage, records both in the status; true when both are ready. */
  probe(): Promise<boolean>;
  /** The `/ready` answer. */
  report(): Promise<ReadyReport>;
}

export function createReadiness(options: ReadinessOptions): Readiness {
  const { status } = options;
  let round: Promise<{ connector: ProbeResult; storage: ProbeResult }> | undefined;
  const probeBoth = () => {
    round ??= Promise.all([probeHermes(options.endpoints, options.timeoutMs), probeStorage(options.ledger, options.timeoutMs)])
      .then(([connector, storage]) => {
        status.connectorReady = connector.ready;
        status.storageReady = storage.ready;
        return { connector, storage };
      })
      .finally(() => {
        round = undefined;
      });
    return round;
  };
  const recovery = {
    recovered_at: timeArray(options.startedAtMs),
    pending_approvals: 0,
    recoverable_transactions: 0,
    queued_results: 0,
    delegation_results: 0,
    callback_deliveries: 0,
  };
  return {
    probe: async () => {
      const { connector, storage } = await probeBoth();
      return connector.ready && storage.ready;
    },
    report: async () => {
      const { connector, storage } = await probeBoth();
      const ready = status.ready();
      return {
        ready,
        body: {
          status: ready ? 'ready' : 'not_ready',
          lease_valid: status.leaseValid(),
          draining: status.draining,
          runtime: { durability: storeDurability(options.ledger), ready: storage.ready, detail: storage.detail, recovery },
          connector: { ready: connector.ready, detail: connector.detail },
        },
      };
    },
  };
}

/**
 * The reference's `RuntimeStoreDurability` (snake_case on the wire): PostgreSQL coordinates the
 * replicas that share it (`durable_shared`); a SQLite file serves one process (`durable_single_process`).
 */
function storeDurability(ledger: RunLedger): 'durable_shared' | 'durable_single_process' {
  return ledger.kind === 'postgres' ? 'durable_shared' : 'durable_single_process';
}

/** Every Hermes endpoint answers `GET /health` (no key) with a 2xx status within the deadline. */
async function probeHermes(endpoints: ReadinessOptions['endpoints'], timeoutMs: number): Promise<ProbeResult> {
  const failures = await Promise.all(
    endpoints.map(async (endpoint) => {
      const url = new URL('health', endpoint.baseUrl.endsWith('/') ? endpoint.baseUrl : `${endpoint.baseUrl}/`);
      try {
        const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), redirect: 'manual' });
        await response.body?.cancel();
        return response.ok ? undefined : `endpoint ${endpoint.id}: GET /health answered HTTP ${response.status}`;
      } catch (error) {
        const timedOut = (error as Error).name === 'TimeoutError';
        return `endpoint ${endpoint.id}: GET /health ${timedOut ? `exceeded ${timeoutMs} milliseconds` : 'failed'}`;
      }
    }),
  );
  const problems = failures.filter((failure) => failure !== undefined);
  return problems.length === 0
    ? { ready: true, detail: 'every Hermes endpoint answers its health check' }
    : { ready: false, detail: problems.join('; ').slice(0, 1024) };
}

/** The run ledger answers a read within the deadline. */
async function probeStorage(ledger: RunLedger, timeoutMs: number): Promise<ProbeResult> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  try {
    const outcome = await Promise.race([ledger.evidence('aip-host-storage-probe', null).then(() => 'ok' as const), timeout]);
    if (outcome === 'timeout') return { ready: false, detail: 'durable runtime storage readiness check timed out' };
    return { ready: true, detail: 'durable runtime storage is readable' };
  } catch {
    return { ready: false, detail: 'durable runtime storage readiness check failed' };
  } finally {
    clearTimeout(timer);
  }
}
