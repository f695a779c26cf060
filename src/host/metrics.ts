/**
 * What the host knows about itself (draining, lease, connector and storage readiness, in-flight
 * actions) and the Prometheus text of `GET /metrics`, with the reference host's metric names and
 * types (`host_metrics` in `crates/aip-connector-host/src/lib.rs`).
 */

export type HostCounter = 'requests_total' | 'rejected_total' | 'heartbeat_failures_total' | 'lease_recovery_attempts_total' | 'lease_recoveries_total';

/** The lease as last granted: its fence sequence and expiry (epoch ms). */
export interface HostLease {
  readonly sequence: number;
  readonly expiresAtMs: number;
}

export class HostStatus {
  draining = false;
  connectorReady = false;
  storageReady = true;
  /** Actions admitted and not yet answered. */
  inFlight = 0;
  lease: HostLease = { sequence: 0, expiresAtMs: 0 };
  readonly #counters: Record<HostCounter, number> = {
    requests_total: 0,
    rejected_total: 0,
    heartbeat_failures_total: 0,
    lease_recovery_attempts_total: 0,
    lease_recoveries_total: 0,
  };
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  count(counter: HostCounter): void {
    this.#counters[counter] += 1;
  }

  counter(counter: HostCounter): number {
    return this.#counters[counter];
  }

  leaseValid(): boolean {
    return this.lease.expiresAtMs > this.#now();
  }

  /** Whether an action may be admitted (check 7: not draining, lease valid, connector ready). */
  admitsActions(): boolean {
    return !this.draining && this.leaseValid() && this.connectorReady;
  }

  /** `/ready` and `aip_connector_host_ready`: admitting actions, with storage ready too. */
  ready(): boolean {
    return this.admitsActions() && this.storageReady;
  }
}

export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** The exposition text: one `# TYPE` line and one unlabelled sample per metric, in the reference's order. */
export function metricsText(status: HostStatus): string {
  const samples: Array<[string, 'gauge' | 'counter', number]> = [
    ['ready', 'gauge', status.ready() ? 1 : 0],
    ['storage_ready', 'gauge', status.storageReady ? 1 : 0],
    ['in_flight', 'gauge', status.inFlight],
    ['requests_total', 'counter', status.counter('requests_total')],
    ['rejected_total', 'counter', status.counter('rejected_total')],
    ['heartbeat_failures_total', 'counter', status.counter('heartbeat_failures_total')],
    ['lease_recovery_attempts_total', 'counter', status.counter('lease_recovery_attempts_total')],
    ['lease_recoveries_total', 'counter', status.counter('lease_recoveries_total')],
  ];
  return samples.map(([name, type, value]) => `# TYPE aip_connector_host_${name} ${type}\naip_connector_host_${name} ${value}\n`).join('');
}
