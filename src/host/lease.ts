/**
 * The host's side of the control plane (`POST /aip/v1/connector-control`): signed register,
 * heartbeat, drain and offline requests, signed answers checked against the pinned control DID,
 * and the lease they grant. A control plane that is down, slow, or answers garbage or an unsigned
 * or wrongly signed body never grants readiness and never stops the host.
 */
import type { Logger } from 'pino';
import { type Dispatcher, request } from 'undici';
import { type ControlCommand, type ControlOutcome, controlRequest, type RegisterPayload, signControlRequest, verifyControlResponse } from './wire/control.js';
import { boundedText } from './outbound.js';
import { messageId } from './wire/ids.js';
import type { SigningKey } from './wire/keys.js';
import { fromTimeArray, parseRfc3339, timeArray } from './wire/time.js';
import type { HostLease, HostStatus } from './metrics.js';
import type { HostSettings } from './settings.js';

/** The most a control request or answer may weigh (the reference's MAX_CONNECTOR_HOST_CONTROL_BYTES). */
const MAX_CONTROL_BYTES = 64 * 1024;
/** How far in the future a control answer's issued_at may be, and how long it may live. */
const CONTROL_CLOCK_SKEW_MS = 5_000;
const CONTROL_LIFETIME_MS = 30_000;

/**
 * A control-plane call that did not grant what was asked. `unavailable`: no trustworthy answer
 * (transport, timeout, garbage, a retryable refusal), so a retry may resend the same request id;
 * `rejected`: a definite refusal (or an answer not from the pinned control plane), so the next
 * attempt needs a fresh request id.
 */
export class ControlPlaneError extends Error {
  readonly kind: 'unavailable' | 'rejected';

  constructor(kind: 'unavailable' | 'rejected', message: string) {
    super(message);
    this.name = 'ControlPlaneError';
    this.kind = kind;
  }
}

export interface ControlPlane {
  /** Sends `command` under `requestId` (one retry after an `unavailable` failure); the granted outcome, else a ControlPlaneError. */
  invoke(requestId: string, command: ControlCommand): Promise<Exclude<ControlOutcome, { status: 'rejected' }>>;
}

export interface ControlClientOptions {
  readonly endpoint: string;
  readonly controlDid: string;
  readonly key: SigningKey;
  readonly timeoutMs: number;
  /** The host's outbound client, which trusts `TLS_CA_FILE` (default: undici's global one). */
  readonly dispatcher?: Dispatcher;
  readonly now?: () => number;
}

export function createControlClient(options: ControlClientOptions): ControlPlane {
  const now = options.now ?? Date.now;
  const sendOnce = async (requestId: string, body: string) => checkedOutcome(await post(options, body), requestId, options.controlDid, now());
  return {
    async invoke(requestId, command) {
      const { text } = signControlRequest(controlRequest(requestId, command, options.key.did, now()), options.key);
      if (Buffer.byteLength(text) > MAX_CONTROL_BYTES) throw new ControlPlaneError('rejected', 'the signed control request exceeds 64 KiB');
      try {
        return await sendOnce(requestId, text);
      } catch (error) {
        if (!(error instanceof ControlPlaneError) || error.kind !== 'unavailable') throw error;
        return sendOnce(requestId, text);
      }
    },
  };
}

/** POSTs the signed body; the answer's text (any HTTP status: the outcome is in the signed body), at most 64 KiB. */
async function post(options: ControlClientOptions, body: string): Promise<string> {
  try {
    const response = await request(options.endpoint, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json' },
      ...(options.dispatcher === undefined ? {} : { dispatcher: options.dispatcher }),
      signal: AbortSignal.timeout(options.timeoutMs),
    });
    const text = await boundedText(response, MAX_CONTROL_BYTES);
    if (text === undefined) throw new ControlPlaneError('unavailable', 'the control-plane answer exceeds 64 KiB');
    return text;
  } catch (error) {
    if (error instanceof ControlPlaneError) throw error;
    throw new ControlPlaneError('unavailable', `control plane unreachable: ${(error as Error).message ?? String(error)}`);
  }
}

/**
 * The granted outcome of a control answer, checked as the reference host checks it: it decodes
 * (else `unavailable`), names our request id, is signed by the pinned control DID, lies in its
 * time window (else `rejected`); a refusal is `unavailable` when retryable, else `rejected`.
 */
function checkedOutcome(text: string, requestId: string, controlDid: string, nowMs: number): Exclude<ControlOutcome, { status: 'rejected' }> {
  const verified = verifyControlResponse(text, controlDid);
  if (!verified.ok) {
    const untrusted = verified.reason.startsWith('signed by') || verified.reason.startsWith('signature');
    throw new ControlPlaneError(untrusted ? 'rejected' : 'unavailable', `control-plane answer refused: ${verified.reason}`);
  }
  const { response } = verified;
  if (response.request_id !== requestId) throw new ControlPlaneError('rejected', 'the control-plane answer names another request id');
  if (!withinControlWindow(response.issued_at, response.expires_at, nowMs)) {
    throw new ControlPlaneError('rejected', 'the control-plane answer is expired or outside the accepted clock skew');
  }
  const { outcome } = response;
  if (outcome.status === 'rejected') {
    throw new ControlPlaneError(outcome.retryable ? 'unavailable' : 'rejected', `${outcome.code}: ${outcome.message.slice(0, 1024)}`);
  }
  return outcome;
}

function withinControlWindow(issuedAt: string, expiresAt: string, nowMs: number): boolean {
  const issued = parseRfc3339(issuedAt);
  const expires = parseRfc3339(expiresAt);
  if (issued === undefined || expires === undefined) return false;
  return issued <= nowMs + CONTROL_CLOCK_SKEW_MS && expires > nowMs && expires > issued && expires - issued <= CONTROL_LIFETIME_MS;
}

/** What a registration says about the running host besides its settings. */
export interface RegistrationFacts {
  readonly principal: { readonly id: string; readonly kind: string };
  readonly did: string;
  readonly manifestDigest: string;
  readonly capabilityCount: number;
}

/**
 * The `register` payload as the reference host builds it (`connector_host_registration`), in the
 * reference types' field order: a ready replica with zero assignments and health revision, the
 * topology explicit, a proposed expiry of now + lease TTL as a time array, capacity = MAX_IN_FLIGHT,
 * and no last_control_request_* fields.
 */
export function registrationPayload(settings: HostSettings, facts: RegistrationFacts, nowMs: number): RegisterPayload {
  return {
    replica: {
      id: settings.replicaId,
      instance_id: settings.instanceId,
      version_id: settings.versionId,
      endpoint: settings.publicEndpoint,
      peer_principal_id: facts.principal.id,
      peer_principal_kind: facts.principal.kind,
      peer_did: facts.did,
      trust_domain: settings.trustDomain,
      transport_profile: 'aip.native.http.v1',
      topology: { region: settings.topology.region, zone: settings.topology.zone, capacity_class: settings.topology.capacity_class },
      status: 'ready',
      lease_expires_at: timeArray(nowMs + settings.limits.leaseTtlMs),
      capacity: settings.limits.maxInFlight,
      active_assignments: 0,
      health_revision: 0,
    },
    manifest_digest: facts.manifestDigest,
    artifact_digest: settings.artifactDigest,
    tenant_id: settings.tenantId,
    config_revision: settings.configRevision,
    secret_provider_ref: settings.secretProviderRef,
    capability_count: facts.capabilityCount,
  };
}

/** The first heartbeat's delay: 0.75 × the interval plus up to half of it (`random` in [0, 1)), as the reference's `heartbeat_initial_delay`. */
export function firstHeartbeatDelay(intervalMs: number, random: number): number {
  return Math.floor((intervalMs * 3) / 4) + Math.floor(random * (Math.floor(intervalMs / 2) + 1));
}

export interface LeaseKeeperOptions {
  readonly control: ControlPlane;
  readonly status: HostStatus;
  readonly replicaId: string;
  readonly heartbeatMs: number;
  /** The registration as of now (its proposed lease_expires_at is now + TTL). */
  readonly registration: () => RegisterPayload;
  /** Probes connector and storage readiness (and records them in `status`); true when both are ready. */
  readonly probe: () => Promise<boolean>;
  readonly logger: Logger;
  /** A number in [0, 1) for the first heartbeat's jitter (default Math.random). */
  readonly random?: () => number;
  readonly now?: () => number;
}

/**
 * Holds the lease: registers, heartbeats (the first jittered to 0.75–1.25 × the interval, then
 * every interval, a late tick skipped), re-registers once the lease has expired (the same request
 * id and payload after an `unavailable` failure, a fresh one after a rejection), and on shutdown
 * sends drain then offline, each fenced with the last granted sequence. Readiness is probed after
 * each beat, for the next one, so a slow Hermes health check never delays a renewal.
 */
export class LeaseKeeper {
  readonly #options: LeaseKeeperOptions;
  readonly #now: () => number;
  #pending: { requestId: string; registration: RegisterPayload } | undefined;
  #timer: NodeJS.Timeout | undefined;
  #nextTickAt = 0;
  #tick: Promise<void> = Promise.resolve();
  #stopped = false;
  /** Connector and storage readiness as last probed: what the next heartbeat reports. */
  #ready = false;

  constructor(options: LeaseKeeperOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  /** The first registration (after a readiness probe); false when it was not granted: the heartbeat loop keeps trying. */
  async register(): Promise<boolean> {
    await this.#probe();
    if (!this.#ready) {
      this.#options.logger.warn('connector or storage not ready: registration deferred to the next heartbeat tick');
      return false;
    }
    try {
      await this.#registerPending();
      return true;
    } catch (error) {
      this.#options.logger.warn({ err: (error as Error).message }, 'control-plane registration failed; retrying on the next heartbeat tick');
      return false;
    }
  }

  /** Starts the heartbeat loop: the first tick 0.75–1.25 × the interval from now. */
  start(): void {
    this.#nextTickAt = this.#now() + firstHeartbeatDelay(this.#options.heartbeatMs, (this.#options.random ?? Math.random)());
    this.#schedule();
  }

  /** Stops the loop (no tick starts after this) and waits for the tick in progress. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#tick;
  }

  /** Shutdown, first half: no more heartbeats; `drain` fenced with the current lease. Rejects when not granted. */
  async drain(): Promise<void> {
    await this.stop();
    const outcome = await this.#options.control.invoke(messageId(), this.#transition('drain'));
    if (outcome.status !== 'lease') throw new ControlPlaneError('unavailable', 'drain answered without a lease');
    this.#apply(outcome.lease);
  }

  /** Shutdown, second half: `offline` fenced with the drain's sequence. Rejects when not granted. */
  async offline(): Promise<void> {
    await this.stop();
    const outcome = await this.#options.control.invoke(messageId(), this.#transition('offline'));
    if (outcome.status !== 'offline') throw new ControlPlaneError('unavailable', 'offline answered without the offline outcome');
  }

  #schedule(): void {
    if (this.#stopped) return;
    const now = this.#now();
    while (this.#nextTickAt <= now - this.#options.heartbeatMs) this.#nextTickAt += this.#options.heartbeatMs;
    this.#timer = setTimeout(
      () => {
        this.#nextTickAt += this.#options.heartbeatMs;
        this.#tick = this.#runTick().finally(() => this.#schedule());
      },
      Math.max(0, this.#nextTickAt - now),
    );
  }

  async #runTick(): Promise<void> {
    const { status } = this.#options;
    if (status.draining || this.#stopped) return;
    try {
      const ready = this.#ready;
      if (status.leaseValid()) await this.#heartbeat(ready);
      else if (ready) await this.#recover();
    } catch (error) {
      status.count('heartbeat_failures_total');
      this.#options.logger.warn({ err: (error as Error).message }, 'control-plane heartbeat failed');
    }
    await this.#probe();
  }

  /** Probes readiness for the next tick; a probe that throws counts as not ready and as a failed tick. */
  async #probe(): Promise<void> {
    try {
      this.#ready = await this.#options.probe();
    } catch (error) {
      this.#ready = false;
      this.#options.status.count('heartbeat_failures_total');
      this.#options.logger.warn({ err: (error as Error).message }, 'readiness probe failed');
    }
  }

  async #heartbeat(connectorReady: boolean): Promise<void> {
    const { status, replicaId } = this.#options;
    const outcome = await this.#options.control.invoke(messageId(), {
      operation: 'heartbeat',
      payload: { replica_id: replicaId, previous_sequence: status.lease.sequence, in_flight: status.inFlight, connector_ready: connectorReady },
    });
    if (outcome.status !== 'lease') throw new ControlPlaneError('unavailable', 'heartbeat answered without a lease');
    this.#apply(outcome.lease);
  }

  async #recover(): Promise<void> {
    this.#options.status.count('lease_recovery_attempts_total');
    await this.#registerPending();
    this.#options.status.count('lease_recoveries_total');
    this.#options.logger.info({ sequence: this.#options.status.lease.sequence }, 'control-plane lease recovered');
  }

  /** Registers under the pending request (kept across `unavailable` failures, dropped after a rejection or a grant). */
  async #registerPending(): Promise<void> {
    this.#pending ??= { requestId: messageId(), registration: this.#options.registration() };
    const { requestId, registration } = this.#pending;
    try {
      const outcome = await this.#options.control.invoke(requestId, { operation: 'register', payload: registration });
      // As the reference's `register_once`: an unexpected outcome is a control-plane error, so the request is kept.
      if (outcome.status !== 'lease') throw new ControlPlaneError('unavailable', 'registration answered without a lease');
      this.#pending = undefined;
      this.#apply(outcome.lease);
    } catch (error) {
      if (!(error instanceof ControlPlaneError) || error.kind === 'rejected') this.#pending = undefined;
      throw error;
    }
  }

  #transition(operation: 'drain' | 'offline'): ControlCommand {
    return { operation, payload: { replica_id: this.#options.replicaId, previous_sequence: this.#options.status.lease.sequence } };
  }

  #apply(lease: { sequence: number; expires_at: number[] }): void {
    const expiresAtMs = fromTimeArray(lease.expires_at);
    if (expiresAtMs === undefined) throw new ControlPlaneError('unavailable', 'lease expiry is not a time array');
    const granted: HostLease = { sequence: lease.sequence, expiresAtMs };
    this.#options.status.lease = granted;
  }
}
