/**
 * What a Hermes endpoint declares it offers, read from its `GET /v1/capabilities`. The connector's
 * behaviour follows these declarations, never the version string in `/health`: a fork or a backport
 * may carry a feature under any version number.
 */
export interface EndpointOffer {
  /** When the declaration was read (ms since the epoch). */
  readonly read_at: number;
  /**
   * `capabilities`: the endpoint served its declaration (0.18.2 on); `not_served`: it answered 404 (the
   * simulator's older profiles); `unreadable`: another answer or a transport failure, so nothing beyond
   * the runs API of the pin is assumed, and the declaration is read again at the next use.
   */
  readonly source: 'capabilities' | 'not_served' | 'unreadable';
  /**
   * `features.runs_idempotency` with `durable: true`: Hermes keeps `(key, request fingerprint)`
   * reservations across restarts for this long, so a `run_start` whose answer was lost may be asked
   * again with the same key to learn its run. Null when not declared.
   */
  readonly durable_run_idempotency: { readonly retention_seconds: number | null } | null;
  /** `features.run_steer` and the `run_steer` endpoint: `POST /v1/runs/{id}/steer` is served. */
  readonly run_steer: boolean;
}

/** The offer of an endpoint whose declaration could not be read: the pin's runs API and nothing more. */
export function undeclaredOffer(readAt: number, source: 'not_served' | 'unreadable'): EndpointOffer {
  return { read_at: readAt, source, durable_run_idempotency: null, run_steer: false };
}

/** The offer a capabilities document declares; anything not declared in the expected shape is not offered. */
export function offerFromCapabilities(document: unknown, readAt: number): EndpointOffer {
  const features = objectAt(document, 'features');
  const endpoints = objectAt(document, 'endpoints');
  return {
    read_at: readAt,
    source: 'capabilities',
    durable_run_idempotency: durableIdempotency(objectAt(features, 'runs_idempotency')),
    run_steer: features?.['run_steer'] === true && declaresRoute(objectAt(endpoints, 'run_steer'), 'POST', '/v1/runs/{run_id}/steer'),
  };
}

function durableIdempotency(declared: Record<string, unknown> | undefined): EndpointOffer['durable_run_idempotency'] {
  if (declared?.['supported'] !== true || declared['durable'] !== true) return null;
  const retention = declared['retention_seconds'];
  return { retention_seconds: typeof retention === 'number' && Number.isFinite(retention) && retention > 0 ? retention : null };
}

function declaresRoute(route: Record<string, unknown> | undefined, method: string, path: string): boolean {
  return route?.['method'] === method && route['path'] === path;
}

function objectAt(value: unknown, key: string): Record<string, unknown> | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const member = (value as Record<string, unknown>)[key];
  return typeof member === 'object' && member !== null && !Array.isArray(member) ? (member as Record<string, unknown>) : undefined;
}
