/**
 * `hermes-aip host`: serves the connector's capabilities to an AIP runtime as a remote connector
 * host. Settings are validated before anything listens; the host then opens its durable ledger,
 * listens, registers with the control plane, serves, and on SIGTERM/SIGINT drains (no new actions,
 * `drain`, in-flight work given the drain timeout then cancelled), stops the server, sends
 * `offline`, and closes the connector and its ledger.
 */
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { pino, type Logger } from 'pino';
import type { Dispatcher } from 'undici';
import { HELP_OPTION, parseCommand } from '../cli/args.js';
import { type LedgerSpec, type LoadedConfig, loadConfig, openConnector } from '../cli/config.js';
import { CliError, EXIT, UsageError } from '../cli/errors.js';
import { HOST_HELP } from '../cli/help.js';
import { redactText } from '../internal/secret.js';
import type { RunLedger } from '../ledger/types.js';
import type { DeliveryTarget } from '../outbox/types.js';
import type { HermesConnector } from '../types.js';
import { createAipEventTarget, type Publishing, RUN_EVENTS_CHANNEL, RUN_EVENTS_CHANNEL_ID } from './event-publisher.js';
import { type ControlPlane, createControlClient, LeaseKeeper, registrationPayload } from './lease.js';
import type { PinnedIdentity } from './checks.js';
import { type AuthenticationLane, createAuthenticationLane } from './lane.js';
import { type CredentialVerdict, createMessageHandler, type MessageHandler } from './messages.js';
import { HostStatus } from './metrics.js';
import { outboundAgent } from './outbound.js';
import { createPlatformMetrics, type PlatformMetrics, REVISION_VARIABLE } from './platform-metrics.js';
import { createReadiness } from './readiness.js';
import { createHostServer, type HostServer } from './server.js';
import {
  type HostSettings,
  HostSettingError,
  loadCredentialPolicy,
  loadHostSettings,
  loadSigningKey,
  revisionAuthorized,
  shutdownBudgetMs,
} from './settings.js';
import type { Principal } from './wire/envelope.js';
import { wireJson } from './wire/json.js';
import type { SigningKey } from './wire/keys.js';
import { bindManifestToHost, manifestDigest } from './wire/manifest.js';

/** Kept, out of the shutdown margin, for closing the connector and its ledger once `offline` is answered. */
const CLOSING_MS = 1_000;
/** How long answers cancelled at the drain timeout may take to be written before connections are cut. */
const CANCELLED_ANSWER_GRACE_MS = 1_000;

export async function hostCommand(args: string[]): Promise<number> {
  const { values } = parseCommand(
    'host',
    args,
    (argv) => parseArgs({ args: argv, strict: true, options: { config: { type: 'string' }, 'print-did': { type: 'boolean' }, help: HELP_OPTION } }),
    'the signing seed and the database URL come from the files named by AIP_CONNECTOR_HOST_SIGNING_SEED_FILE and AIP_CONNECTOR_HOST_DATABASE_URL_FILE',
  );
  if (values.help) {
    process.stdout.write(HOST_HELP);
    return EXIT.ok;
  }
  if (values['print-did']) {
    process.stdout.write(`${settingsOrUsage(() => loadSigningKey(process.env)).did}\n`);
    return EXIT.ok;
  }
  const logger = pino({ name: 'hermes-aip-host' }, pino.destination({ fd: 2, sync: true }));
  const host = await openHost(process.env, values.config, logger);
  try {
    const terminated = termination();
    await host.register();
    await terminated;
    return await host.shutdown();
  } finally {
    await host.close();
  }
}

/** A host listening on its bind address, not yet registered with the control plane. */
export interface OpenHost {
  readonly address: AddressInfo;
  readonly principal: Principal;
  readonly replicaId: string;
  /** Registers with the control plane, starts the lease's heartbeats and logs that it listens. */
  register(): Promise<void>;
  /** Drains and stops serving (see `shutdown`); the exit code. */
  shutdown(): Promise<number>;
  /** Closes the platform metrics, the outbound client, the authentication lane, the connector and its ledger. */
  close(): Promise<void>;
}

/**
 * The host `hermes-aip host` serves, from its environment and config file (settings validated first:
 * a bad one is a UsageError before anything opens). Exported so that the bench measures this very host in its own process.
 */
export async function openHost(env: NodeJS.ProcessEnv, configPath: string | undefined, logger: Logger): Promise<OpenHost> {
  const settings = settingsOrUsage(() => loadHostSettings(env));
  const config = bindEndpointsToHostTenant(loadConfig(configPath, env), settings);
  const events = eventPublishing(settings);
  const { connector, ledger } = openConnector(
    { ...config, ledger: durableLedger(config, settings), ...(events ? { journal: config.journal ?? {} } : {}) },
    events ? { eventTargets: [events.target] } : {},
  );
  const closeConnector = () =>
    connector.close().catch((error: unknown) => logger.error({ err: (error as Error).message }, 'closing the connector and its ledger failed'));
  try {
    return await listening(settings, config, { connector, ledger, events }, logger, closeConnector);
  } catch (error) {
    await closeConnector();
    throw error;
  }
}

function settingsOrUsage<T>(load: () => T): T {
  try {
    return load();
  } catch (error) {
    if (error instanceof HostSettingError) throw new UsageError(error.message);
    throw error;
  }
}

/** AIP_CONNECTOR_HOST_DATABASE_URL_FILE, else the config file's ledger or HERMES_LEDGER; a host without one is refused. */
function durableLedger(config: LoadedConfig, settings: HostSettings): LedgerSpec {
  if (settings.databaseUrl !== undefined) {
    return { kind: 'postgres', connectionString: settings.databaseUrl.reveal(), from: 'AIP_CONNECTOR_HOST_DATABASE_URL_FILE' };
  }
  if (config.ledger !== undefined) return config.ledger;
  throw new UsageError(
    'AIP_CONNECTOR_HOST_DATABASE_URL_FILE: is required: a host needs a durable run ledger (or the config file\'s "ledger", or HERMES_LEDGER)',
  );
}

/**
 * A host serves one tenant, so its endpoints are bound to it: the manifest says so, and the run journal's
 * takeover and purge stay within that tenant when replicas of other tenants share the ledger and endpoint ids.
 * An endpoint bound to another tenant could never run an action the host admits: refused.
 */
function bindEndpointsToHostTenant(config: LoadedConfig, settings: HostSettings): LoadedConfig {
  for (const { config: endpoint } of config.endpoints) {
    if (endpoint.tenantId !== undefined && endpoint.tenantId !== settings.tenantId) {
      throw new UsageError(`AIP_CONNECTOR_HOST_TENANT_ID: endpoint "${endpoint.id}" is bound to another tenant (${config.source})`);
    }
  }
  return { ...config, endpoints: config.endpoints.map((endpoint) => ({ ...endpoint, config: { ...endpoint.config, tenantId: settings.tenantId } })) };
}

/**
 * The AIP event target when AIP_CONNECTOR_HOST_EVENT_ENDPOINT is set. It is handed to the connector before
 * the host knows its identity and lease, so it publishes nothing until `publishWith` tells it what with.
 */
interface EventPublishing {
  readonly target: DeliveryTarget;
  publishWith(current: () => Publishing | undefined): void;
}

function eventPublishing(settings: HostSettings): EventPublishing | undefined {
  if (settings.events === undefined) return undefined;
  let current: () => Publishing | undefined = () => undefined;
  const target = createAipEventTarget({
    endpoint: settings.events.url,
    instanceId: settings.instanceId,
    key: settings.signingKey,
    publishing: () => current(),
  });
  return {
    target,
    publishWith: (next) => {
      current = next;
    },
  };
}

/** What the host serves and signs as: its principal, the bound manifest and its digest. */
interface Identity {
  readonly principal: Principal;
  readonly manifest: Record<string, unknown> & { capabilities?: unknown[] };
  readonly digest: string;
}

interface OpenedConnector {
  readonly connector: HermesConnector;
  readonly ledger: RunLedger;
  readonly events: EventPublishing | undefined;
}

async function listening(
  settings: HostSettings,
  config: LoadedConfig,
  { connector, ledger, events }: OpenedConnector,
  logger: Logger,
  closeConnector: () => Promise<void>,
): Promise<OpenHost> {
  await ledgerOrFail(ledger, settings);
  const principal = hostPrincipal(connector, settings, settings.signingKey);
  // The channel is declared whenever events are published: the admitted manifest (and its digest) says so.
  const manifest = bindManifestToHost(connector.manifest(), principal, events ? [RUN_EVENTS_CHANNEL] : []);
  const identity: Identity = { principal, manifest, digest: manifestDigest(manifest) };
  const status = new HostStatus();
  const stop = new AbortController();
  // One client for everything the host sends out: the control plane, stream chunks and provider events, all under TLS_CA_FILE.
  const outbound = outboundAgent(settings.tlsCaPem);
  events?.publishWith(() => (status.ready() ? publishing(settings, identity, status.lease.sequence, outbound) : undefined));
  const readiness = createReadiness({
    status,
    endpoints: config.endpoints.map(({ config: endpoint }) => ({ id: endpoint.id, baseUrl: endpoint.baseUrl })),
    ledger,
    timeoutMs: settings.limits.healthTimeoutMs,
    startedAtMs: Date.now(),
  });
  const platform = platformMetrics(config, connector);
  const pinned = pinnedIdentity(settings, identity);
  // Its worker starts with the first large body.
  const lane = createAuthenticationLane({ key: settings.signingKey, pinned, heapMb: settings.limits.authenticationHeapMb });
  const closeClients = async () => {
    platform.close();
    await outbound.close();
    await lane.close();
  };
  const server = createHostServer({
    status,
    messages: messageHandler(settings, { connector, ledger, status, stop, logger, outbound, pinned, lane, platform }),
    manifestText: wireJson(manifest),
    ready: () => readiness.report(),
    platformMetrics: platform,
    maxRequestBytes: settings.limits.maxRequestBytes,
    maxConnections: settings.limits.maxConnections,
    largeBodyBytes: settings.limits.largeBodyBytes,
    bodyBudgetBytes: settings.limits.bodyBudgetBytes,
    logger,
  });
  const address = await listenOrFail(server, settings).catch(async (error: unknown) => {
    await closeClients();
    throw error;
  });
  const control = createControlClient({
    endpoint: settings.controlEndpoint,
    controlDid: settings.controlDid,
    key: settings.signingKey,
    timeoutMs: settings.limits.controlTimeoutMs,
    dispatcher: outbound,
  });
  const keeper = leaseKeeper(settings, identity, { control, status, probe: () => readiness.probe(), logger });
  return {
    address,
    principal,
    replicaId: settings.replicaId,
    register: async () => {
      await keeper.register();
      keeper.start();
      const where = address.address.includes(':') ? `[${address.address}]` : address.address;
      logger.info({ address: `${where}:${address.port}`, did: settings.signingKey.did, manifest_digest: identity.digest }, 'AIP connector host listening');
    },
    shutdown: () => shutdown({ settings, status, keeper, server, stop, logger }),
    close: async () => {
      await closeClients();
      await closeConnector();
    },
  };
}

interface HandlerParts {
  readonly connector: HermesConnector;
  readonly ledger: RunLedger;
  readonly status: HostStatus;
  readonly stop: AbortController;
  readonly logger: Logger;
  readonly outbound: Dispatcher;
  readonly pinned: PinnedIdentity;
  readonly lane: AuthenticationLane;
  readonly platform: PlatformMetrics;
}

/** Build info, process metrics and the latencies of actions and of calls to these Hermes endpoints. */
function platformMetrics(config: LoadedConfig, connector: HermesConnector): PlatformMetrics {
  return createPlatformMetrics({
    revision: process.env[REVISION_VARIABLE] || 'unknown',
    hermesOrigins: config.endpoints.map(({ config: endpoint }) => new URL(endpoint.baseUrl).origin),
    operationOf: (capabilityId) => connector.capability(capabilityId)?.bindings[0]?.operation,
  });
}

/** The central gateway's principal: who sends actions, and who provider events go to. */
function gatewayPrincipal(settings: HostSettings): Principal {
  return { id: settings.gatewayPrincipalId, kind: 'service', trust_domain: settings.trustDomain };
}

/** This host's identity and route coordinates, and the gateway it trusts. */
function pinnedIdentity(settings: HostSettings, identity: Identity): PinnedIdentity {
  return {
    host: identity.principal,
    gateway: gatewayPrincipal(settings),
    gatewayDid: settings.gatewayDid,
    tenantId: settings.tenantId,
    instanceId: settings.instanceId,
    replicaId: settings.replicaId,
    versionId: settings.versionId,
    manifestDigest: identity.digest,
    callbackTarget: settings.callback?.url,
    // The gateway's static binding (§1.4): claims naming exactly these are the host's own identity.
    credential: settings.credential === undefined ? undefined : { id: settings.credential.id, issuer: settings.credential.issuer },
    externalAccount: settings.externalAccount,
  };
}

/** The message path, pinned to this host's identity, route coordinates and limits; large bodies authenticated in the lane. */
function messageHandler(settings: HostSettings, parts: HandlerParts): MessageHandler {
  return createMessageHandler({
    connector: parts.connector,
    ledger: parts.ledger,
    key: settings.signingKey,
    pinned: parts.pinned,
    lane: parts.lane,
    largeBodyBytes: settings.limits.largeBodyBytes,
    heartbeatMs: settings.limits.heartbeatMs,
    maxInFlight: settings.limits.maxInFlight,
    status: parts.status,
    authorizeCredential: async (revision) => credentialVerdict(settings, revision),
    stopSignal: parts.stop.signal,
    logger: parts.logger,
    outbound: parts.outbound,
    observeAction: (capabilityId, outcome, seconds) => parts.platform.observeAction(capabilityId, outcome, seconds),
  });
}

/** What provider events go with while the host is ready (the reference's `event_publish_ready`): its route under the current lease. */
function publishing(settings: HostSettings, identity: Identity, leaseSequence: number, outbound: Dispatcher): Publishing {
  const { did: _did, ...signer } = identity.principal;
  return {
    signer,
    recipient: gatewayPrincipal(settings),
    recipientDid: settings.gatewayDid,
    route: {
      tenant_id: settings.tenantId,
      instance_id: settings.instanceId,
      replica_id: settings.replicaId,
      version_id: settings.versionId,
      manifest_digest: identity.digest,
      lease_sequence: leaseSequence,
      channel_id: RUN_EVENTS_CHANNEL_ID,
    },
    dispatcher: outbound,
  };
}

/** The lease keeper, registering what this host runs. */
function leaseKeeper(
  settings: HostSettings,
  identity: Identity,
  parts: { control: ControlPlane; status: HostStatus; probe: () => Promise<boolean>; logger: Logger },
): LeaseKeeper {
  const facts = {
    principal: { id: identity.principal.id, kind: identity.principal.kind },
    did: settings.signingKey.did,
    manifestDigest: identity.digest,
    capabilityCount: identity.manifest.capabilities?.length ?? 0,
  };
  return new LeaseKeeper({
    ...parts,
    replicaId: settings.replicaId,
    heartbeatMs: settings.limits.heartbeatMs,
    registration: () => registrationPayload(settings, facts, Date.now()),
  });
}

/** The host's signing principal: the connector manifest's agent, in the configured trust domain, with the host's DID. */
function hostPrincipal(connector: HermesConnector, settings: HostSettings, key: SigningKey): Principal {
  const { agent } = connector.manifest();
  return { id: agent.id, kind: agent.kind, display_name: agent.display_name, trust_domain: settings.trustDomain, did: key.did };
}

function credentialVerdict(settings: HostSettings, revision: string | null): CredentialVerdict {
  if (settings.credentialPolicyFile === undefined) {
    const current = settings.credential?.revisionRef ?? null;
    return revisionAuthorized({ current_revision_ref: current, accepted_previous_revisions: [], revoked_revisions: [] }, revision) ? 'authorized' : 'denied';
  }
  try {
    return revisionAuthorized(loadCredentialPolicy(settings.credentialPolicyFile), revision) ? 'authorized' : 'denied';
  } catch {
    return 'unavailable';
  }
}

/** The ledger answers before the host binds (the reference refuses to start on storage it cannot open). */
async function ledgerOrFail(ledger: RunLedger, settings: HostSettings): Promise<void> {
  try {
    await ledger.evidence('aip-host-storage-probe', null);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const secret = settings.databaseUrl?.reveal();
    throw new CliError(`cannot open the run ledger: ${secret === undefined ? message : redactText(message, secret)}`, EXIT.failed);
  }
}

async function listenOrFail(server: HostServer, settings: HostSettings) {
  try {
    return await server.listen(settings.bind.host, settings.bind.port);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'listen failed';
    throw new CliError(`cannot listen on ${settings.bind.text}: ${code}`, EXIT.failed);
  }
}

/** Resolves on the first SIGTERM or SIGINT; later ones are ignored while the host drains. */
function termination(): Promise<void> {
  return new Promise((resolve) => {
    const ignoreLater = (): void => {};
    const first = (): void => {
      process.off('SIGTERM', first);
      process.off('SIGINT', first);
      process.on('SIGTERM', ignoreLater);
      process.on('SIGINT', ignoreLater);
      resolve();
    };
    process.on('SIGTERM', first);
    process.on('SIGINT', first);
  });
}

interface Shutdown {
  settings: HostSettings;
  status: HostStatus;
  keeper: LeaseKeeper;
  server: HostServer;
  stop: AbortController;
  logger: Logger;
}

/**
 * Drains within the reference's bound (drain timeout + 5 s): refuse new actions, `drain`, wait for
 * in-flight actions until the drain timeout, cancel the rest, stop the server, `offline`. Exit 0
 * when drain and offline were granted, 1 when the control plane did not grant them.
 */
async function shutdown({ settings, status, keeper, server, stop, logger }: Shutdown): Promise<number> {
  const started = Date.now();
  const drainDeadline = started + settings.limits.drainTimeoutMs;
  const finalDeadline = started + shutdownBudgetMs(settings.limits) - CLOSING_MS;
  status.draining = true;
  logger.info({ in_flight: status.inFlight, drain_timeout_ms: settings.limits.drainTimeoutMs }, 'AIP connector host draining');
  const drained = await beforeDeadline(keeper.drain(), finalDeadline - CANCELLED_ANSWER_GRACE_MS, 'drain', logger);
  await inFlightSettled(status, drainDeadline);
  if (status.inFlight > 0) {
    logger.warn({ in_flight: status.inFlight }, 'drain timeout reached: cancelling the actions still in flight');
    stop.abort();
  }
  await server.close(Math.max(0, Math.min(CANCELLED_ANSWER_GRACE_MS, finalDeadline - Date.now())));
  const offline = await beforeDeadline(keeper.offline(), finalDeadline, 'offline', logger);
  logger.info({ drained, offline }, 'AIP connector host stopped');
  return drained && offline ? EXIT.ok : EXIT.failed;
}

/** Whether `work` succeeded before `deadline`; its failure or lateness is logged, never thrown. */
async function beforeDeadline(work: Promise<void>, deadline: number, what: string, logger: Logger): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), Math.max(0, deadline - Date.now()));
  });
  try {
    const outcome = await Promise.race([work.then(() => 'done' as const), late]);
    if (outcome === 'late') logger.warn(`control-plane ${what} did not answer before the shutdown deadline`);
    return outcome === 'done';
  } catch (error) {
    logger.warn({ err: (error as Error).message }, `control-plane ${what} failed`);
    return false;
  } finally {
    clearTimeout(timer);
  }
}

/** Waits until no action is in flight, or the deadline. */
async function inFlightSettled(status: HostStatus, deadline: number): Promise<void> {
  while (status.inFlight > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
}
