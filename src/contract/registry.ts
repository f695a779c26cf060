import type { ResolvedConfig, ResolvedEndpoint } from '../config.js';
import { MAX_EVENTS_CEILING } from '../config.js';
import {
  AGENT_ID,
  AIP_VERSION,
  CAPABILITY_PREFIX,
  CONNECTOR_ID,
  CONNECTOR_PROFILE,
  HERMES_PINNED_REVISION,
  PACKAGE_NAME,
  PACKAGE_VERSION,
} from '../internal/package-info.js';
import { deepFreeze, schemaCatalog, type OperationDeclaration, type OperationSchemas } from './schemas.js';
import { OPERATION_NAMES, type AipCapability, type AipManifest, type ImplementationSupport, type OperationName } from '../types.js';

export interface CapabilityEntry {
  readonly capability: AipCapability;
  readonly endpoint: ResolvedEndpoint;
  readonly operation: OperationName;
  readonly schemas: OperationSchemas;
}

/** `cap:hermes_agent:<endpoint_id>:<operation>` */
export function capabilityId(endpointId: string, operation: OperationName): string {
  return `${CAPABILITY_PREFIX}${endpointId}:${operation}`;
}

/** Every capability of every endpoint, built once; lookups by id are a map read. */
export class CapabilityRegistry {
  readonly #entries = new Map<string, CapabilityEntry>();
  readonly #capabilities: readonly AipCapability[];
  readonly #config: ResolvedConfig;
  #manifest: AipManifest | undefined;

  constructor(config: ResolvedConfig) {
    this.#config = config;
    const { operations } = schemaCatalog();
    for (const endpoint of config.endpoints) {
      for (const operation of OPERATION_NAMES) {
        const schemas = operations[operation];
        const capability = buildCapability(endpoint, operation, schemas);
        this.#entries.set(capability.id, { capability, endpoint, operation, schemas });
      }
    }
    this.#capabilities = Object.freeze([...this.#entries.values()].map((entry) => entry.capability));
  }

  resolve(id: unknown): CapabilityEntry | undefined {
    return typeof id === 'string' ? this.#entries.get(id) : undefined;
  }

  capabilities(): AipCapability[] {
    return [...this.#capabilities];
  }

  /** The endpoint's capability for another operation (cancel() turns any action into run_stop). */
  sibling(entry: CapabilityEntry, operation: OperationName): CapabilityEntry {
    return this.#entries.get(capabilityId(entry.endpoint.id, operation)) as CapabilityEntry;
  }

  manifest(): AipManifest {
    this.#manifest ??= deepFreeze(buildManifest(this.#config, this.#capabilities));
    return this.#manifest;
  }
}

function buildCapability(endpoint: ResolvedEndpoint, operation: OperationName, schemas: OperationSchemas): AipCapability {
  const { declaration } = schemas;
  const where = endpoint.displayName ?? endpoint.id;
  return deepFreeze({
    id: capabilityId(endpoint.id, operation),
    name: `${declaration.title} (${where})`,
    kind: 'workflow',
    description: `${declaration.description} Maps AIP action \`${operation}\` to Hermes Agent ${declaration.http.method} ${declaration.http.path}.`,
    input_schema: schemas.inputSchema,
    output_schema: schemas.outputSchema,
    risk: declaration.risk,
    stability: 'stable',
    auth: { scheme: 'bearer', source: 'endpoint.api_key' },
    bindings: [
      {
        profile: CONNECTOR_PROFILE,
        endpoint_id: endpoint.id,
        operation,
        method: declaration.http.method,
        path: declaration.http.path,
        streaming: declaration.http.streaming,
      },
    ],
    requires_human_approval: declaration.contract.approval?.required === true,
    contract: declaration.contract,
  });
}

function buildManifest(config: ResolvedConfig, capabilities: readonly AipCapability[]): AipManifest {
  const { limits } = config;
  return {
    manifest_version: 'aip-manifest/v1',
    agent: { id: AGENT_ID, kind: 'agent', display_name: 'Hermes Agent connector' },
    profiles: [CONNECTOR_PROFILE],
    capabilities: [...capabilities],
    security: {
      auth: { scheme: 'bearer', per_endpoint: true, source: 'endpoint.api_key' },
      tenant_binding: 'fail_closed',
      session_key_header: 'X-Hermes-Session-Key',
      redirects: 'never_followed',
    },
    limits: {
      max_json_response_bytes: limits.maxJsonResponseBytes,
      max_stream_response_bytes: limits.maxStreamResponseBytes,
      max_sse_frame_bytes: limits.maxSseFrameBytes,
      max_request_body_bytes: limits.maxRequestBodyBytes,
      default_max_events: limits.defaultMaxEvents,
      max_events: MAX_EVENTS_CEILING,
      sse_idle_timeout_ms: limits.sseIdleTimeoutMs,
    },
    compatibility: {
      aip_version: AIP_VERSION,
      connector: { id: CONNECTOR_ID, package: PACKAGE_NAME, version: PACKAGE_VERSION },
      system: 'hermes-agent',
      upstream_revision: HERMES_PINNED_REVISION,
      endpoints: config.endpoints.map((endpoint) => endpoint.id),
      tenant_bound_endpoints: config.endpoints.filter((endpoint) => endpoint.tenantId !== undefined).map((endpoint) => endpoint.id),
      operations: [...OPERATION_NAMES],
    },
  };
}

/** What the connector really implements for a capability; unknown capabilities support nothing. */
export function implementationSupport(entry: CapabilityEntry | undefined): ImplementationSupport {
  return entry === undefined ? NO_SUPPORT : operationSupport(entry.schemas.declaration);
}

const NO_SUPPORT: ImplementationSupport = Object.freeze({
  invocation: false,
  cancellation: false,
  streaming: false,
  retry: false,
  transaction: false,
  reconciliation: false,
  compensation: false,
  approval: false,
  credentials: false,
});

/** What the connector implements for every capability of one operation, as its contract declares it. */
export function operationSupport(declaration: OperationDeclaration): ImplementationSupport {
  const { execution, approval } = declaration.contract;
  return {
    ...NO_SUPPORT,
    invocation: true,
    cancellation: execution?.supports_cancel === true,
    streaming: execution?.supports_streaming === true,
    retry: execution?.supports_retry === true,
    approval: approval?.required === true,
  };
}
